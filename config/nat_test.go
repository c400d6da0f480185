package config

import (
	"net/netip"
	"testing"
	"time"
)

func TestNATDefaults(t *testing.T) {
	c, err := Parse("x.toml", []byte(twoPorts+`
[[nat]]
sources = ["198.19.0.0/24"]
port = "wan0"

[nat_options]
udp_timeout = "30s"
filtering = "endpoint-independent"
`))
	if err != nil {
		t.Fatal(err)
	}
	n := c.NAT[0]
	if n.Name != "nat0" || n.PortLo != 1024 || n.PortHi != 32767 || len(n.Outside) != 1 || n.Outside[0] != netip.MustParseAddr("198.18.1.1") {
		t.Fatalf("rule %+v", n)
	}
	o := c.NATOptions
	if o.UDP != 30*time.Second || o.Filtering != FilteringEndpointIndependent || o.MaxSessions != 1<<20 || o.TCPEstablished != 2*time.Hour+4*time.Minute {
		t.Fatalf("options %+v", o)
	}
}
