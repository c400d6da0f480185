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
//
// # Engine
//
// New builds an Engine over ports; Engine.Workers returns one Worker per
// queue index. Worker.Poll does one pass: Rx from every port, then per
// packet Parse and either the router (ModeRouter) or the bridge
// (ModeBridge), collecting frames into per-egress-port batches that are
// sent when full and at the end of the pass. The clock is read once per
// poll. Who calls Poll, on which thread and how often is the caller's
// business (ovfwd's appliance/runner).
//
// Router, in the order a packet meets it: Parse; martians (addresses never
// routed at either end, martian.go) dropped; the tunnel's IPv4 datagrams
// to our addresses taken to the tunnel's decap batch (demux.go); the FIB
// lookup; the TTL and
// MTU checks; NAT (nat.go, a stage only while a [[nat]] rule exists);
// the per-hop rewrite and the neighbour. The FIB is a pair of fwd/lpm
// tables mapping prefixes to indexes
// of an append-only adjacency array (connected, via gateway, local,
// tunnel peer, blackhole). Our own addresses are host routes to a local
// adjacency, so one lookup classifies a packet. The lookups of a received
// batch are done together (one lpm LookupBatch per family, fib.go), so their
// DRAM misses overlap instead of queueing one behind another. Per hop: TTL/hop limit
// decrement with an RFC 1624 checksum update, MTU check (ICMP fragmentation
// needed / packet too big; IPv4 without DF is fragmented),
// optional TCP MSS clamp, neighbour lookup, Ethernet header written into
// the bytes in front of the IP header. The payload never moves; a packet is
// copied only when the egress port's buffer pool differs (counted).
//
// Neighbours: entries are created and expired by the control plane
// (Engine.Service) and read lock-free by workers; a worker
// refreshes an existing entry's MAC and expiry with atomic stores and
// reports new ones through a bounded ring. Unresolved next hops hold a few
// packets per worker (Config.NeighHold) while ARP/NS probes are sent.
//
// Bridge: a MAC table shared by all workers, lock-free (see macTable for
// why it is shared rather than per worker), per-VLAN learning and aging,
// flooding to every other member port of the VLAN with one copy per extra
// port.
//
// Control plane to data plane: tables and the neighbour index are
// immutable and swapped behind atomic pointers. Data plane to control
// plane: the learn ring and the punt ring (Engine.Punts), both bounded and
// counting what they drop; Engine.Events reports neighbours learned and
// expired. Counters are plain per worker and published to Stats once per
// poll.
//
// Exception path (inject.go), for ports whose NIC the kernel never sees:
// Engine.Inject copies a frame from the host into a bounded ring that
// worker 0 (owner of queue 0 of every port) drains once per poll into a
// buffer of the egress port; Engine.SetHostCopies adds a copy of every
// ARP/ND packet of a port to the punt ring, so the host learns neighbours.
package fwd
