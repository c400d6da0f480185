package vpnload

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// TestRunShort runs the whole bench briefly against both servers: every
// client must connect and traffic must reach the sink through each.
func TestRunShort(t *testing.T) {
	nstest.RequireRoot(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, &out, Options{Clients: 8, Duration: time.Second, Runs: 1, PerClientPPS: 2000, Logf: t.Logf})
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results, want one per target", len(res))
	}
	for _, r := range res {
		if r.Connected != r.Clients {
			t.Errorf("%s: %d of %d clients connected", r.Target, r.Connected, r.Clients)
		}
		// 8 clients × 2000 pkt/s × 1 s offered: most must arrive.
		if r.Delivered < r.Offered/2 || r.Offered < 1000 {
			t.Errorf("%s: delivered %d of %d offered packets", r.Target, r.Delivered, r.Offered)
		}
		if r.ServerCPUSeconds <= 0 {
			t.Errorf("%s: no server CPU time measured", r.Target)
		}
		if r.Generator != GenRaw || r.OfferedPPS <= 0 {
			t.Errorf("%s: generator %q offered %.0f pkt/s; want the raw generator by default", r.Target, r.Generator, r.OfferedPPS)
		}
	}
}

// TestRunSocketGenerator runs the bench briefly against ovfwd with the
// clients' own sockets as the generator: traffic must reach the sink.
func TestRunSocketGenerator(t *testing.T) {
	nstest.RequireRoot(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, &out, Options{Target: TargetOvfwd, Generator: GenSocket, Clients: 4, Duration: time.Second, Runs: 1, PerClientPPS: 2000, Logf: t.Logf})
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Generator != GenSocket {
		t.Fatalf("results %+v, want one socket-generator run", res)
	}
	if r := res[0]; r.Delivered < r.Offered/2 || r.Offered < 4000 {
		t.Errorf("delivered %d of %d offered packets", r.Delivered, r.Offered)
	}
}
