// Package vpnload is the VPN concentrator load generator behind
// `ovfwd bench vpn`: N ovfwd clients (vpn/control.Client) in one network
// namespace each complete a real OpenVPN 2.6 handshake with the server
// under test, then offer UDP traffic through their tunnels to a sink
// namespace behind the server. It measures handshakes/s, packets and bits
// delivered at the sink per second, loss, and the server process's CPU
// seconds per million delivered packets, for ovfwd (the daemon binary on
// AF_XDP ports) and a stock openvpn 2.6 server (--server, tls-crypt,
// AES-256-GCM), alternating runs and printing medians and ratios.
//
// Topology (namespaces tagged "h15l", addresses from 198.18.0.0/15):
//
//	clients lc0 198.18.80.2 ── p0 198.18.80.1  server  p1 198.18.81.1 ── sk0 198.18.81.2 sink
//
// An XDP program on sk0 counts and drops the traffic to 198.18.82.0/24
// (delivered packets are its count) and passes the rest, so the sink
// still answers pings; a blackhole route backs it up. As bench fwd's
// sink, it keeps the sink's receive work, which a veth runs in the
// transmitting server's context, out of the server's CPU figure.
//
// Generators (Options.Generator): "raw", the default, seals the
// clients' packets into pre-addressed Ethernet frames and sends them from
// packet sockets on lc0, several threads each owning a subset of the
// clients (gen_raw.go); "socket" sends through each client's own UDP
// socket, one goroutine per client (load.go). The output shows the
// offered rate next to the delivered one, the generator process's CPU
// share and cost per packet, and the server's CPU share: offered well
// above delivered, with the server's core full, means the server was the
// limit. Note that the veth delivers to the server's port in the
// sender's softirq, so the server-side receive work (ovfwd: XDP redirect
// and copy into the AF_XDP ring; openvpn: IP and UDP receive) runs on the
// generator's CPU, a large share of its time (docs/benchmarks.md), and is
// not in the server's CPU figure.
//
// Like for like: Run pins itself (generator and clients) to GenCPU, 0 by
// default, and either server to ServerCPU, 1 (taskset; ovfwd's worker too);
// each server runs in a session (scheduler autogroup) of its own, its data
// path at the nice of ovfwd's workers (openvpn's nice option). Rates and
// server CPU cover exactly the offered window — the sink's count and the
// server's CPU time are read as the generator starts and stops, after it
// sealed packets ahead — and what arrives in the drain after it is
// reported apart (loss counts it as delivered).
//
// Threading: Run owns everything it starts (namespaces, server processes,
// clients) and tears it down before returning; it is not meant to be run
// twice at once on one machine.
package vpnload
