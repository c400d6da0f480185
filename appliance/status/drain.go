package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// OpDrain is the drain write operation:
//
//	drain            → start draining; clients stay until they leave
//	drain DEADLINE   → and tell those left after DEADLINE (e.g. 10m) to reconnect elsewhere
//	drain cancel     → end the drain
//
// The Request's Target carries the deadline ("" none) or "cancel"; the
// Reply's Drain the drain as it stands.
const OpDrain = "drain"

// DrainCancel is the Target of "drain cancel".
const DrainCancel = "cancel"

func parseDrain(args []string) (Request, error) {
	r := Request{Op: OpDrain}
	switch {
	case len(args) == 0:
	case len(args) == 1 && args[0] == DrainCancel:
		r.Target = DrainCancel
	case len(args) == 1:
		if d, err := time.ParseDuration(args[0]); err != nil || d <= 0 {
			return r, fmt.Errorf("drain: bad deadline %q (write e.g. 10m, or cancel)", args[0])
		}
		r.Target = args[0]
	default:
		return r, errors.New("drain: too many arguments (drain [DEADLINE|cancel])")
	}
	return r, nil
}

// DrainDeadline is a parsed drain request's deadline (0: none).
func (r Request) DrainDeadline() time.Duration {
	d, _ := time.ParseDuration(r.Target)
	return d
}

// StartDrain asks the appliance on path to drain (deadline 0: no
// deadline), or with cancel to stop draining.
func StartDrain(path string, deadline time.Duration, cancel bool, timeout time.Duration) (*Drain, error) {
	line := OpDrain
	switch {
	case cancel:
		line += " " + DrainCancel
	case deadline > 0:
		line += " " + deadline.String()
	}
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		return nil, fmt.Errorf("status: is ovfwd running? %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c, "%s\n", line); err != nil {
		return nil, err
	}
	var r Reply
	if err := json.NewDecoder(c).Decode(&r); err != nil {
		return nil, fmt.Errorf("status: %s: %w", path, err)
	}
	if r.Error != "" {
		return r.Drain, errors.New(r.Error)
	}
	return r.Drain, nil
}
