// Package export installs the routes an appliance owns into a kernel
// routing table, for a routing daemon (BIRD 2, FRR) to announce by BGP:
// ovfwd holds no BGP code; the kernel table is the interface, and the
// routes being there is the readiness signal the daemon follows.
//
// Routes lead to a TUN device of the exporter's own, in a table no policy
// rule consults, so they never steer the kernel's own traffic. The device
// is not persistent: it and its routes vanish with the process, so a
// crashed ovfwd is withdrawn within the routing daemon's reaction to an
// interface going away, not after a BGP hold timer. The routes carry a
// protocol number of their own (rtm_protocol), by which a later run
// recognises and removes anything else left behind.
//
// Threading: an Exporter's methods may be called from any goroutine; they
// serialise on one lock and one netlink socket.
package export
