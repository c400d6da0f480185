package control_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
)

// TestServerReconfigure changes the pushed routes and keepalive of a
// running server: a client connecting afterwards must be pushed the new
// ones, while a client connected before keeps its tunnel, its key and the
// options it was pushed, and keeps passing traffic. Lowering MaxPeers
// must turn the next client away; raising it past the start value is refused.
func TestServerReconfigure(t *testing.T) {
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", nil)
	dial := func(name string, timeout time.Duration) (*control.Client, error) {
		cfg := clientProfile(t, dir, name, e.addr())
		cfg.Logf = newSyncLog(t).logf
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return control.Dial(ctx, cfg)
	}
	alice, err := dial("alice", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	pa := alice.Pushed()
	oldRoute, newRoute := netip.MustParsePrefix("198.18.72.0/24"), netip.MustParsePrefix("198.18.73.0/24")
	if !slices.Equal(pa.Routes, []netip.Prefix{oldRoute}) {
		t.Fatalf("alice pushed routes %v before the change", pa.Routes)
	}
	ping(t, alice, pa.Gateway4, 1)
	before, _ := e.dp.Peer(pa.PeerID)

	tun := e.srv.Tunables()
	tun.Routes = []netip.Prefix{newRoute}
	tun.Ping, tun.PingRestart = 2*time.Second, 9*time.Second
	if err := e.srv.Reconfigure(tun); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.Tunables(); !slices.Equal(got.Routes, tun.Routes) || got.Ping != tun.Ping {
		t.Fatalf("Tunables after Reconfigure = %+v", got)
	}

	bob, err := dial("bob", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	pb := bob.Pushed()
	if !slices.Equal(pb.Routes, []netip.Prefix{newRoute}) || pb.Ping != 2*time.Second || pb.PingRestart != 9*time.Second {
		t.Errorf("bob (after the change) pushed routes %v ping %v/%v", pb.Routes, pb.Ping, pb.PingRestart)
	}
	ping(t, bob, pb.Gateway4, 1)

	// alice's tunnel is untouched: same key, still carrying traffic.
	for seq := uint16(2); seq <= 4; seq++ {
		ping(t, alice, pa.Gateway4, seq)
	}
	after, ok := e.dp.Peer(pa.PeerID)
	if !ok || after.Primary != before.Primary || after.Keys[after.Primary] != before.Keys[before.Primary] {
		t.Errorf("alice's data key changed across Reconfigure")
	}
	if got := alice.Pushed(); !slices.Equal(got.Routes, []netip.Prefix{oldRoute}) {
		t.Errorf("alice's pushed routes became %v", got.Routes)
	}

	// Limits: a raise past the start value is refused and changes nothing;
	// a lower MaxPeers turns the third client away.
	raise := e.srv.Tunables()
	raise.MaxPeers = 1 << 20
	if err := e.srv.Reconfigure(raise); err == nil {
		t.Error("Reconfigure accepted MaxPeers above the start value")
	}
	lower := e.srv.Tunables()
	if lower.MaxPeers != 1024 {
		t.Errorf("refused Reconfigure changed MaxPeers to %d", lower.MaxPeers)
	}
	lower.MaxPeers = 2
	if err := e.srv.Reconfigure(lower); err != nil {
		t.Fatal(err)
	}
	if carol, err := dial("carol", 3*time.Second); err == nil {
		carol.Close()
		t.Error("a third client connected with MaxPeers lowered to 2")
	}
	if n := e.srv.Drop(control.DropMaxPeers); n == 0 {
		t.Error("no max_peers drop counted for the turned-away client")
	}
	ping(t, alice, pa.Gateway4, 5)
}
