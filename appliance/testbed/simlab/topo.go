package simlab

import (
	"fmt"

	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// Interface names, the same in every lab (each lives in its own namespace).
const (
	IfHostA = "sim-a0" // in host A
	IfWireA = "sim-a1" // appliance namespace: model port 0's wire
	IfWireB = "sim-b1" // appliance namespace: model port 1's wire
	IfHostB = "sim-b0" // in host B
)

// Topology is the lab's three namespaces.
type Topology struct {
	A, App, B *netns.NS
}

// Build creates the namespaces and veth pairs, the hosts' addresses and
// default routes from cfg (the same Config as appliance/testbed/lab; cfg.Ports'
// addresses belong to the engine only). On failure it removes what it made.
func Build(cfg lab.Config) (t *Topology, err error) {
	t = &Topology{}
	defer func() {
		if err != nil {
			t.Destroy()
			t = nil
		}
	}()
	for _, x := range []struct {
		ns  **netns.NS
		tag string
	}{{&t.A, "sima"}, {&t.App, "simm"}, {&t.B, "simb"}} {
		if *x.ns, err = netns.Create(x.tag); err != nil {
			return
		}
	}
	if err = netns.Veth(t.A, IfHostA, t.App, IfWireA); err != nil {
		return
	}
	if err = netns.Veth(t.B, IfHostB, t.App, IfWireB); err != nil {
		return
	}
	run := func(ns *netns.NS, args ...string) {
		if err == nil {
			_, err = ns.Run(args...)
		}
	}
	for _, ifn := range []string{IfWireA, IfWireB} {
		// No kernel chatter (RS, MLD) from the appliance side, and VLAN
		// tags left in the frame for the model to see.
		run(t.App, "sysctl", "-q", "-w", "net.ipv6.conf."+ifn+".disable_ipv6=1")
		run(t.App, "ethtool", "-K", ifn, "rxvlan", "off")
	}
	for _, h := range []struct {
		ns   *netns.NS
		ifn  string
		host lab.Host
	}{{t.A, IfHostA, cfg.HostA}, {t.B, IfHostB, cfg.HostB}} {
		// Checksum offload stays on (the engine finishes what the hosts
		// leave unfinished). Segmentation is off: this veth stands in
		// for the far end of a cable, which carries frames of the link's
		// MTU, and the model's wire (fullsim.Wire, an AF_PACKET socket)
		// would read a host's 64 KiB GSO super-packet as one frame.
		run(h.ns, "ethtool", "-K", h.ifn, "tso", "off", "gso", "off")
		for _, a := range h.host.Addrs {
			run(h.ns, "ip", "addr", "add", a.String(), "dev", h.ifn, "nodad")
		}
		for _, via := range h.host.Via {
			fam := "-4"
			if via.Is6() {
				fam = "-6"
			}
			run(h.ns, "ip", fam, "route", "add", "default", "via", via.String(), "dev", h.ifn)
		}
	}
	return t, err
}

// Destroy deletes the namespaces (and with them the veths and every
// process the lab started there).
func (t *Topology) Destroy() {
	for _, ns := range []*netns.NS{t.A, t.App, t.B} {
		if ns != nil {
			ns.Delete()
		}
	}
}

// Names lists the namespaces, for messages.
func (t *Topology) Names() string {
	return fmt.Sprintf("host A %s, appliance %s, host B %s", t.A.Name, t.App.Name, t.B.Name)
}
