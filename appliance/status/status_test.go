package status

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func sample() Snapshot {
	return Snapshot{
		Version: "v1", PID: 42, Started: time.Unix(1000, 0), Taken: time.Unix(1060, 0), Config: "/etc/ovfwd/ovfwd.toml",
		Mode: "router", Poll: "adaptive", Workers: []Worker{{Queue: 0, CPU: 1}},
		Ports: []Port{{Name: "p0", Driver: "afxdp", Reason: "auto: no pci set", IfName: "eth1", Link: "up", MTU: 1500,
			Queues: []Queue{{Queue: 0, Mode: "copy, native XDP", RxPackets: 10}}, Rx: Traffic{10, 1000}, Tx: Traffic{9, 900},
			Backend: Counters{"tx_full": 2, "kick_errors": 0}}},
		Drops:  Counters{"no_route": 3, "malformed": 0},
		Engine: Counters{"punts": 1},
		Routes: Routes{Connected: 1, Static: 1, Total: 2, Prefixes: []string{"198.18.60.0/24 via 198.18.51.1 dev p1 (static)"}},
		VPN: &VPN{Listen: []string{"0.0.0.0:1194"}, Peers: []VPNPeer{{Name: "alice", Real: "198.18.50.1:40000",
			Addrs: []string{"198.19.0.2"}, Rx: Traffic{5, 500}, LastSeen: time.Unix(1059, 0)}}},
		Uplinks: []Uplink{{Name: "site-b", Remote: "198.18.51.9:1194", State: "connected", Addrs: []string{"198.19.9.2/24"},
			Routes: []string{"198.18.64.0/20"}, MTU: 1420, Counters: Counters{"tx_packets": 7, "tx_down": 0}}},
		Reload:   Reload{Count: 1, Failed: 1, LastError: "x.toml:3: appliance.mode: unknown mode"},
		NotReady: "draining", Drain: &Drain{Since: time.Unix(1050, 0).UTC(), Peers: 1},
		Export: &Export{Table: 200, Protocol: 201},
	}
}

func TestServeFetch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "ovfwd.sock")
	want := sample()
	var calls atomic.Int32
	srv, err := Listen(path, func() Snapshot { calls.Add(1); return want })
	if err != nil {
		t.Fatal(err)
	}
	got, err := Fetch(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.Ports[0].Rx != want.Ports[0].Rx || got.Drops["no_route"] != 3 || got.VPN.Peers[0].Name != "alice" ||
		!got.Started.Equal(want.Started) || got.Reload != want.Reload {
		t.Errorf("round trip: got %+v", got)
	}
	if _, err := Listen(path, func() Snapshot { return want }); err == nil {
		t.Error("a second server took over a live socket")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if calls.Load() == 0 {
		t.Error("fetch answered without building a snapshot")
	}
	if _, err := Fetch(path, 200*time.Millisecond); err == nil {
		t.Error("fetch succeeded after Close")
	}
	// A stale socket file (crashed run) is replaced.
	srv, err = Listen(path, func() Snapshot { return want })
	if err != nil {
		t.Fatalf("restart over a stale socket: %v", err)
	}
	srv.Close()
}

func TestWriteText(t *testing.T) {
	s := sample()
	var b strings.Builder
	if err := WriteText(&b, &s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"up 1m0s", "q0→cpu1", "p0 (eth1) driver afxdp, link up", "queue 0: copy, native XDP",
		"rx 10 packets 1000 bytes", "backend: tx_full=2\n", "drops: no_route=3\n", "routes: 2 (connected 1, static 1",
		"198.18.60.0/24 via 198.18.51.1 dev p1 (static)", "alice from 198.18.50.1:40000, 198.19.0.2: rx 500 B",
		"reloads: 1 ok, 1 rejected; last rejected: x.toml:3",
		"not ready: draining\ndraining since 1970-01-01T00:17:30Z, 1 clients left\nexport: table 200 protocol 201: none\n",
		"site-b to 198.18.51.9:1194: connected as 198.19.9.2/24, routes 198.18.64.0/20, mtu 1420\n    tx_packets=7\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "kick_errors") || strings.Contains(out, "malformed") {
		t.Errorf("zero counters printed:\n%s", out)
	}
}

func TestTextNAT(t *testing.T) {
	s := sample()
	s.NAT = &NAT{
		Rules:    []NATRule{{Name: "vpn", Sources: []string{"198.19.0.0/24"}, Port: "wan0", Outside: []string{"198.18.1.1"}, Ports: "1024-32767"}},
		Sessions: Counters{"tcp": 4, "udp": 2, "icmp": 1}, Counters: Counters{"translated": 9}, Drops: Counters{"no_port": 3},
		Clients: []NATClient{{Inside: "198.19.0.2", Name: "alice", Outside: "198.18.1.1", Blocks: []string{"1280-1535"}, Ports: 256}},
	}
	var b strings.Builder
	if err := WriteText(&b, &s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nat: sessions tcp 4 udp 2 icmp 1\n",
		"rule vpn: 198.19.0.0/24 out of wan0 as 198.18.1.1 ports 1024-32767", "drops: no_port=3",
		"client 198.19.0.2 (alice): 198.18.1.1 ports 1280-1535 (256 ports)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status text lacks %q:\n%s", want, b.String())
		}
	}
}
