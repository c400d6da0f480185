// Package vpnbench measures the VPN data path against the reference: TCP
// throughput through the tunnel (iperf3, each direction) and the server's
// CPU seconds per GB moved, for ovfwd on AF_XDP ports and for an openvpn
// 2.6 server, in one run, on the same namespace topology with the same
// stock openvpn client, PKI, control-channel wrapping and cipher
// (appliance/testbed/vpne2e builds all of it). Runs alternate A B A B so drift on
// a shared machine hits both servers alike; the summary is medians.
// Both servers are placed alike: on ServerCPU (1; ovfwd's workers too),
// while this process, the client and iperf3 stay on ClientCPU (0); each
// in a session (scheduler autogroup) of its own, apart from the client
// and iperf3; its data path at the nice
// of ovfwd's workers (openvpn's nice option); no MSS clamp on either
// server, so the client's mssfix sizes the segments of both (the MSS
// column shows it).
//
// CPU is the server process's utime+stime from /proc/PID/stat (all
// threads) over the measured transfers only. Kernel work a server
// triggers but that runs in softirq context on another task's time is
// not in either number; the LAN host's and client's costs are excluded
// for both. The idle column is each server's CPU use with the client
// connected and no traffic, so a polling cost shows up as itself.
//
// Threading: Run is synchronous and owns everything it starts.
package vpnbench
