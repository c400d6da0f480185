// Package status is what `ovfwd status` shows: a Snapshot of a running
// appliance (ports, queues and their modes, counters, drops by reason,
// routes, VPN peers), served as JSON over a unix socket by the daemon and
// printed as text or JSON by the command.
//
// Threading: a Server calls its snapshot function once per connection, on
// the connection's goroutine; the function must be safe to call from any
// goroutine (the daemon builds snapshots from atomics and control-plane
// state under its own locks). Snapshots are plain values and never shared.
package status
