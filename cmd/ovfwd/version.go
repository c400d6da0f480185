package main

import (
	"fmt"

	"github.com/ovfwd/ovfwd/cmd/ovfwd/version"
)

func versionCmd(args []string) error {
	fs := newFlags("version", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Println("ovfwd", version.Version)
	return nil
}
