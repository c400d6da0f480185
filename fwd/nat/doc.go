// Package nat is ovfwd's NAT44: endpoint-independent mapping with
// endpoint-dependent filtering by default (RFC 4787 REQ-1, REQ-8), TCP
// (RFC 5382), UDP, ICMP echo with the identifier as the port and ICMP errors
// with their quoted headers translated (RFC 5508), modelled on VPP's nat44-ed.
//
// # Ownership and threads
//
// A Table belongs to one worker and is touched by that worker only: no
// locks, no atomics per packet, no Go maps, no allocation after NewTable.
// Which worker owns a flow is a pure function of the packet, so every
// worker computes it alike: an inside address belongs to worker
// hash(addr) mod n (all its mappings, sessions and port blocks live there),
// and an outside port belongs to the worker that owns its port block
// (block index mod n). Out and In return Handoff with the owner when a
// packet landed on another worker's queue (RSS spreads returning traffic
// over every queue); the caller moves it there (VPP's nat44-ed does the
// same with its worker handoff nodes).
//
// # State
//
// A session is a flow between an inside endpoint and a remote endpoint; a
// mapping is an inside endpoint's outside address and port, shared by all
// of its sessions (endpoint-independent mapping). Each client (inside
// address) holds whole port blocks on one outside address (paired pooling,
// RFC 4787 REQ-2); every block allocation and release is reported as an
// Event so that one log line per block answers an abuse report. Records
// live in preallocated arrays indexed by open-addressing hash indexes with
// backward-shift deletion. Time is the worker's coarse clock in seconds,
// passed in once per poll (Refresh).
package nat
