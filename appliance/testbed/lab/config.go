package lab

import (
	"net/netip"

	"github.com/ovfwd/ovfwd/fwd"
)

// Config is the lab's topology and the appliance's configuration. The lead
// maps the appliance part onto the config package; until then the lab's
// defaults live here.
type Config struct {
	Mode   fwd.Mode
	Queues int // RX/TX queues of every veth (1: a plain veth)

	// Host A and host B sit behind appliance ports 0 and 1. In router mode
	// each has its own subnet and routes to the other via the appliance; in
	// bridge mode they share one subnet and the appliance has no address.
	HostA, HostB Host
	Ports        [2]PortConfig
	VPNPort      uint16 // UDP port of the VPN data channel (0 until the VPN lands)
}

// Host is one end host.
type Host struct {
	Addrs []netip.Prefix
	Via   []netip.Addr // default routes (router mode): the appliance's addresses
	// Behind are extra addresses on the host's loopback: hosts "behind"
	// it, which the appliance reaches by a static route via the host.
	Behind []netip.Prefix
}

// PortConfig is one appliance port. Its addresses are both the engine's
// (it answers ARP/ND and routes for them) and the kernel's (management:
// ping, SSH and the VPN control channel go to the kernel).
type PortConfig struct {
	Addrs []netip.Prefix
}

// DefaultConfig is the router-mode lab, IPv4 and IPv6.
func DefaultConfig() Config {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	return Config{
		Mode:   fwd.ModeRouter,
		Queues: 1,
		HostA:  Host{Addrs: []netip.Prefix{p("198.18.30.1/24"), p("2001:db8:30::1/64")}, Via: []netip.Addr{a("198.18.30.254"), a("2001:db8:30::fe")}},
		HostB:  Host{Addrs: []netip.Prefix{p("198.18.31.1/24"), p("2001:db8:31::1/64")}, Via: []netip.Addr{a("198.18.31.254"), a("2001:db8:31::fe")}},
		Ports: [2]PortConfig{
			{Addrs: []netip.Prefix{p("198.18.30.254/24"), p("2001:db8:30::fe/64")}},
			{Addrs: []netip.Prefix{p("198.18.31.254/24"), p("2001:db8:31::fe/64")}},
		},
	}
}

// BridgeConfig is the bridge-mode lab: both hosts on one subnet.
func BridgeConfig() Config {
	p := netip.MustParsePrefix
	return Config{
		Mode:   fwd.ModeBridge,
		Queues: 1,
		HostA:  Host{Addrs: []netip.Prefix{p("198.18.32.1/24"), p("2001:db8:32::1/64")}},
		HostB:  Host{Addrs: []netip.Prefix{p("198.18.32.2/24"), p("2001:db8:32::2/64")}},
	}
}
