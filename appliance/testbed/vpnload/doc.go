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
// sink, it keeps the kernel's IP receive path out of the server's CPU
// figure, but not all of the sink's work: a veth runs its peer's NAPI
// poll in softirq on the transmitting CPU, at the end of each frame's
// transmit, so sk0's poll — each skb copied into a page-pool page for XDP
// (drivers/net/veth.c veth_convert_skb_to_xdp_buff; neither server's skbs
// have XDP's headroom) and the counter run — is in both servers' CPU
// figures, the same work per packet for both.
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
// Where the server's core goes: each run also reads, at the two ends of
// the offered window, the server process's utime and stime
// (/proc/PID/stat) and its CPU's line of /proc/stat, and prints the
// process's user and system shares, the time its threads were runnable
// but waiting for a CPU (/proc/PID/task/TID/schedstat: other load starving
// it), the CPU's softirq, idle and other (busy, not the server's) shares,
// and the generator CPU's softirq share (CPUSplit). The kernel accounts by tick (HZ; this kernel has no
// CONFIG_IRQ_TIME_ACCOUNTING): a tick is charged to the running task and
// to one /proc/stat field, so a softirq run at the end of the server's
// own system call (the sink's poll above) is in both its stime and the
// CPU's softirq. Idle is the server CPU's idle time: what is left when
// the generator is the limit. ovfwd's worker, adaptive by default, spins
// up to 256 empty polls before it sleeps; that spin is in its user time,
// not idle, so idle understates its headroom (poll "busy" shows none).
// With Options.OvfwdBinB two ovfwd builds alternate run by run in one
// invocation (an A/B of a change), each run's line and the medians
// printed for both.
//
// Threading: Run owns everything it starts (namespaces, server processes,
// clients) and tears it down before returning; it is not meant to be run
// twice at once on one machine.
package vpnload
