package vpnload

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/netns"
)

// TestRunShort runs the whole bench briefly against both servers: every
// client must connect and traffic must reach the sink through each.
func TestRunShort(t *testing.T) {
	netns.RequireRoot(t)
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
	}
}
