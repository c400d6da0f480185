// Package nlsync mirrors the kernel's view of the appliance's namespace
// into ovfwd's forwarding table: the routes of one kernel routing table,
// the neighbours an operator pins (`ip neigh add … nud permanent`), and the
// up/down state of the ports' links. Changes arrive by netlink multicast
// (RouteSubscribe, NeighSubscribe, LinkSubscribe), so a route added with
// `ip route` reaches the FIB within milliseconds, not at the next poll.
// The other way, NeighMirror writes the neighbours ovfwd learns into the
// kernel's table (ovfwd consumes ARP and ND on its ports).
//
// Threading: Start runs one goroutine per subscription; each calls the Sink
// from that goroutine only, so Sink methods may be called concurrently from
// up to three goroutines and must be safe for that (the daemon's are
// serialised by its route table's mutex). Start must be called in the
// namespace of the ports: the netlink sockets stay where they are opened.
package nlsync
