package main

import (
	"fmt"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// drainCmd starts or ends a drain through the status socket (root and
// the daemon's group only; see status.Authorized).
func drainCmd(args []string) error {
	fs := newFlags("drain", "[-s SOCKET | -c FILE] [-deadline D] [-cancel]")
	socketPath := socketFlags(fs)
	deadline := fs.Duration("deadline", 0, "tell the clients still connected after this long to reconnect elsewhere (0: wait until they leave)")
	cancel := fs.Bool("cancel", false, "end the drain: announce the routes and admit clients again")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sock, err := socketPath()
	if err != nil {
		return err
	}
	dr, err := status.StartDrain(sock, *deadline, *cancel, 5*time.Second)
	if err != nil {
		return err
	}
	switch {
	case *cancel:
		fmt.Println("drain ended: routes announced again, new clients admitted")
	case dr != nil && !dr.Deadline.IsZero():
		fmt.Printf("draining: routes withdrawn, new clients sent elsewhere; clients left at %s are told to reconnect elsewhere\n", dr.Deadline.Format(time.RFC3339))
	default:
		fmt.Println("draining: routes withdrawn, new clients sent elsewhere; connected clients stay until they leave")
	}
	return nil
}
