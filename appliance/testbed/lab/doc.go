// Package lab is ovfwd's namespace lab — host A ⇄ appliance ⇄ host B
// joined by veth pairs — and what `ovfwd lab` and `sudo make lab` run.
//
// Run builds the namespaces and runs the real appliance in the middle one:
// `ovfwd run` on the embedded lab.toml (router mode, IPv4 + IPv6, AF_XDP
// ports, the VPN with a PKI made for the run by vpn/pki), as the packaged
// unit runs it: its user, capabilities and limits (appliance/testbed/unit). Host A also runs
// a stock openvpn client with an `ovfwd pki client` profile. Once the
// appliance is ready, the tunnel up and every path answers a ping (next
// hops resolved), Run drives routed traffic A→B and tunnel traffic from
// A's tun0 to addresses behind host B, and prints the appliance's status
// counters once a second. Each
// run keeps its PKI, config, logs and a state.json (namespaces, PIDs) in
// StateRoot/<pid>, so that Clean — called at the start of every run —
// removes a lab whose process crashed or was left up with Keep.
//
// The package also holds the in-process fixture of the privileged
// forwarding tests (Build, StartAppliance: the fwd engine on AF_XDP ports,
// run by the daemon's worker loop, appliance/runner, without the rest of
// the daemon) and the traffic tools other packages' tests use
// (TCPTransfer, UDPFlow).
//
// Threading: Run owns everything it starts (processes, traffic goroutines)
// and stops all of it before returning, except what Keep leaves up. An
// Appliance's methods are control plane and may be called from any
// goroutine.
package lab
