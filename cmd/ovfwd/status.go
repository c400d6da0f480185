package main

import (
	"encoding/json"
	"io"
	"os"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

func statusCmd(args []string) error {
	fs := newFlags("status", "[-s SOCKET | -c FILE] [-json]")
	socketPath := socketFlags(fs)
	asJSON := fs.Bool("json", false, "print the raw JSON snapshot")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sock, err := socketPath()
	if err != nil {
		return err
	}
	s, err := status.Fetch(sock, 5*time.Second)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(os.Stdout, s)
	}
	return status.WriteText(os.Stdout, s)
}

func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}
