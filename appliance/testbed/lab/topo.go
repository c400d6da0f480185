package lab

import (
	"fmt"
	"strconv"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/fwd"
)

// Interface names, the same in every lab (each lives in its own namespace).
const (
	ifHostA = "lab-a0" // in host A
	ifAppA  = "lab-a1" // appliance port 0
	ifAppB  = "lab-b1" // appliance port 1
	ifHostB = "lab-b0" // in host B
)

// Topology is the lab's three namespaces.
type Topology struct {
	A, App, B *netns.NS
	Config    Config
}

// Build creates the namespaces, the veth pairs and the hosts' addresses
// and routes. The appliance namespace gets its ports' addresses (the
// kernel's management addresses) but no forwarding: ovfwd forwards.
func Build(cfg Config) (t *Topology, err error) {
	t = &Topology{Config: cfg}
	defer func() {
		if err != nil {
			t.Destroy()
			t = nil
		}
	}()
	if t.A, err = netns.Create("laba"); err != nil {
		return
	}
	if t.App, err = netns.Create("labm"); err != nil {
		return
	}
	if t.B, err = netns.Create("labb"); err != nil {
		return
	}
	if err = vethPair(t.A, ifHostA, t.App, ifAppA, cfg.Queues); err != nil {
		return
	}
	if err = vethPair(t.B, ifHostB, t.App, ifAppB, cfg.Queues); err != nil {
		return
	}
	run := func(ns *netns.NS, args ...string) {
		if err == nil {
			_, err = ns.Run(args...)
		}
	}
	for _, h := range []struct {
		ns   *netns.NS
		ifn  string
		host Host
	}{{t.A, ifHostA, cfg.HostA}, {t.B, ifHostB, cfg.HostB}} {
		// The hosts keep a veth's default offloads: ovfwd finishes the
		// checksums they leave unfinished (engine event csum_partial).
		// A bridge does not parse L4 and so cannot: bridged hosts finish
		// their own, the operator's fix for bridge mode on veths
		// (docs/fragments-and-offloads.md, "Bridge mode").
		if cfg.Mode == fwd.ModeBridge {
			run(h.ns, "ethtool", "-K", h.ifn, "tx", "off")
		}
		for _, a := range h.host.Addrs {
			run(h.ns, "ip", "addr", "add", a.String(), "dev", h.ifn, "nodad")
		}
		for _, a := range h.host.Behind {
			run(h.ns, "ip", "addr", "add", a.String(), "dev", "lo", "nodad")
		}
		for _, via := range h.host.Via {
			fam := "-4"
			if via.Is6() {
				fam = "-6"
			}
			run(h.ns, "ip", fam, "route", "add", "default", "via", via.String(), "dev", h.ifn)
		}
	}
	for i, ifn := range []string{ifAppA, ifAppB} {
		for _, a := range cfg.Ports[i].Addrs {
			run(t.App, "ip", "addr", "add", a.String(), "dev", ifn, "nodad")
		}
	}
	// The kernel must not forward behind ovfwd's back (traffic it gets is
	// only what the steering program passes: its own).
	run(t.App, "sysctl", "-q", "-w", "net.ipv4.ip_forward=0", "net.ipv6.conf.all.forwarding=0")
	return t, err
}

func vethPair(a *netns.NS, ifA string, b *netns.NS, ifB string, queues int) error {
	if queues <= 1 {
		return netns.Veth(a, ifA, b, ifB)
	}
	q := strconv.Itoa(queues)
	// Created inside a, then the peer moved to b: nothing touches the root namespace.
	if _, err := a.Run("ip", "link", "add", ifA, "numtxqueues", q, "numrxqueues", q, "type", "veth",
		"peer", "name", ifB, "numtxqueues", q, "numrxqueues", q); err != nil {
		return err
	}
	if _, err := a.Run("ip", "link", "set", ifB, "netns", b.Name); err != nil {
		return err
	}
	if _, err := a.Run("ip", "link", "set", ifA, "up"); err != nil {
		return err
	}
	_, err := b.Run("ip", "link", "set", ifB, "up")
	return err
}

// Destroy deletes the namespaces (and with them the veths, the XDP
// programs on them and every process the lab started there).
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
