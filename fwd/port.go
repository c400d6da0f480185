package fwd

import "net"

// PortInfo describes a port to the engine.
type PortInfo struct {
	Name    string
	MAC     net.HardwareAddr
	MTU     int // L3 MTU
	Queues  int
	Pool    uint16 // buffer pool id; ports that share memory report the same id
	BufSize int    // size of one buffer (headroom + max frame + tailroom)
}

// Port moves batches of frames. Queue q of a port is used by worker q only,
// so implementations need no locks on the per-queue path.
//
// Ownership: Rx hands buffers to the caller; Tx takes every packet it is
// given (sent, or dropped and counted by the port) and empties the batch;
// Free returns buffers the caller no longer needs; Alloc lends empty buffers
// (Off = Headroom, Len = 0) for packets the engine builds or copies. Tx, Free
// and Alloc only see buffers of this port's Pool; the pipeline copies (and
// counts the copy) when the ingress pool differs from the egress pool.
type Port interface {
	Info() PortInfo
	// Rx appends up to b.Room() received frames to b and returns how many. It never blocks.
	Rx(q int, b *Batch) int
	// Tx queues every packet of b for transmission on queue q, kicks the
	// device if needed, resets b and returns how many were accepted.
	Tx(q int, b *Batch) int
	// Free returns the buffers of b to the pool and resets b.
	Free(q int, b *Batch)
	// Alloc appends up to n empty buffers to b and returns how many.
	Alloc(q int, b *Batch, n int) int
	Close() error
}

// Tunnel terminates an encrypted tunnel on the appliance (the OpenVPN data
// channel). Both calls work on a whole batch in place, one call per batch.
//
// Decap gets UDP datagrams addressed to the tunnel (FlagParsed set, L4Off at
// the UDP header). For each packet it either rewrites it to the inner IP
// packet (Off/Len at the inner IP header, FlagL3Only and FlagIPv4|FlagIPv6
// set, Peer set, Verdict = VerdictForward), or sets VerdictDrop with a
// Reason, or takes what it needs (a control packet copied to the control
// plane) and sets VerdictConsumed, leaving the buffer for the caller to free.
//
// Encap gets inner IP packets (FlagL3Only, Peer set by the route) and
// rewrites each, in place using the headroom, to an outer IP/UDP datagram to
// the peer's current address (FlagL3Only and the outer family flags set), or
// sets VerdictDrop with a Reason. An Encap that sets FlagParsed vouches for
// L3Off, L4Off and the protocol flags of the headers it wrote: the engine
// routes the datagram without parsing it again.
type Tunnel interface {
	Decap(q int, b *Batch)
	Encap(q int, b *Batch)
}
