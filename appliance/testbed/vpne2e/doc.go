// Package vpne2e drives stock openvpn 2.6 clients against a VPN server in a
// namespace lab, for the end-to-end tests of the concentrator and for the
// ovfwd-vs-openvpn comparison (appliance/testbed/vpnbench).
//
// Topology (addresses in Plan):
//
//	client i ns  c0 198.18.140.(1+i), 2001:db8:140::(1+i) ─┐
//	                                      [switch ns br0, only with >1 client]
//	appliance ns p0 198.18.140.254, 2001:db8:140::fe ──────┘
//	             p1 198.18.141.254, 2001:db8:141::fe ── lan0 198.18.141.1, 2001:db8:141::1  LAN ns
//
// The server (ovfwd on AF_XDP ports, or `openvpn --server`) runs in the
// appliance namespace and hands out 198.18.142.0/24 and 2001:db8:142::/64,
// pushing routes to the LAN. iperf3 servers run on the LAN host.
//
// Threading: a Lab and the processes it starts belong to one goroutine;
// Client and Server values may be stopped from any goroutine once.
// Every process is started in its own process group and killed by PID;
// Lab.Close removes everything, including after a failure.
package vpne2e
