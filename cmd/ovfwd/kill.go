package main

import (
	"fmt"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// killCmd disconnects VPN clients through the status socket (root and the
// daemon's group only; see status.Authorized).
func killCmd(args []string) error {
	fs := newFlags("kill", "[-s SOCKET | -c FILE] [-halt] NAME|ADDR")
	socketPath := socketFlags(fs)
	halt := fs.Bool("halt", false, "tell the client to exit (HALT) instead of reconnecting (RESTART)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1, 1); err != nil {
		return err
	}
	sock, err := socketPath()
	if err != nil {
		return err
	}
	n, err := status.Kill(sock, pos[0], *halt, 5*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("disconnected %d session(s) of %s\n", n, pos[0])
	return nil
}
