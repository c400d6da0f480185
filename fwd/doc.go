// Package fwd is ovfwd's packet engine: the packet and batch model shared by every
// backend, header parsing, the L2 bridge, the L3 router and the pipeline that
// joins them.
//
// # Threading contract
//
// The data plane is a set of workers. Worker q owns queue q of every port: it
// alone calls Rx, Tx, Alloc and Free for that queue index, so no queue needs a
// lock. A worker is one goroutine locked to an OS thread that runs to
// completion over batches; it never blocks, allocates, takes a lock, sends on
// a channel, reads a Go map or calls time.Now per packet.
//
// The control plane (any other goroutine) changes what the workers see only by
// publishing a new immutable table through an atomic pointer (copy-on-write).
// Workers hand packets to the control plane through bounded rings and count
// what they drop when a ring is full.
//
// fwd knows nothing of mlx5, AF_XDP or the OpenVPN wire format: ports and
// tunnels plug in through the Port and Tunnel interfaces, which move whole
// batches, never single packets.
package fwd
