package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
)

// TestServerDrain: while draining, a connected client keeps its tunnel
// and a new one is not admitted (told to go elsewhere, counted as
// draining, given no peer); EvictAll then removes the connected one, and
// after SetDraining(false) clients are admitted again.
func TestServerDrain(t *testing.T) {
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", nil)
	dial := func(name string, timeout time.Duration) (*control.Client, error) {
		cfg := clientProfile(t, dir, name, e.addr())
		cfg.Logf = newSyncLog(t).logf
		cfg.NoReconnect = true
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
	ping(t, alice, pa.Gateway4, 1)

	e.srv.SetDraining(true)
	if bob, err := dial("bob", 5*time.Second); err == nil {
		bob.Close()
		t.Fatal("a new client was admitted while draining")
	}
	if n := e.srv.Drop(control.DropDraining); n == 0 {
		t.Error("the refused client was not counted as draining")
	}
	if n := len(e.dp.Peers()); n != 1 {
		t.Errorf("%d data-plane peers while draining with one client, want 1", n)
	}
	ping(t, alice, pa.Gateway4, 2)

	if n := e.srv.EvictAll(); n != 1 {
		t.Errorf("EvictAll evicted %d, want 1", n)
	}
	if _, ok := e.dp.Peer(pa.PeerID); ok {
		t.Error("evicted client still has a data-plane peer")
	}

	e.srv.SetDraining(false)
	carol, err := dial("carol", 20*time.Second)
	if err != nil {
		t.Fatalf("after the drain ended: %v", err)
	}
	defer carol.Close()
	ping(t, carol, carol.Pushed().Gateway4, 1)
}
