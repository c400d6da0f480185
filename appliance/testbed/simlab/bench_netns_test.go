package simlab

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
)

// BenchmarkSimRouterUDP: b.N UDP datagrams (64-byte payload, 106-byte
// frames) from host A to host B as fast as one sender goroutine writes
// them, through the router on the model. Reports what the engine forwarded
// per second (fwd-pps) and the share lost on the way (loss-%), wherever it
// was lost: the hosts' sockets, the wire, the model's rings; and the
// share of injected frames the model dropped (model-drop-%).
//
//	sudo go test -run '^$' -bench SimRouterUDP -benchtime 200000x ./appliance/testbed/simlab/
func BenchmarkSimRouterUDP(b *testing.B) {
	tp, app := startLab(b, lab.DefaultConfig())
	ping(b, tp.A, "198.18.31.1")
	var flow lab.UDPFlow
	before := app.Engine.Stats()
	wireBefore := app.Wires[0].Stats()
	b.ResetTimer()
	start := time.Now()
	if err := flow.Run(context.Background(), tp.A, tp.B, netip.MustParseAddr("198.18.31.1"), 100_000_000, uint64(b.N)); err != nil {
		b.Fatal(err)
	}
	// Run waits 200 ms for stragglers after the last send.
	secs := time.Since(start).Seconds() - 0.2
	b.StopTimer()
	after := app.Engine.Stats()
	fwd := after.Ports[1].TxPackets - before.Ports[1].TxPackets
	b.ReportMetric(float64(fwd)/secs, "fwd-pps")
	// Frames the wire injected that the engine never received were
	// dropped by the model (RQ full: the worker fell behind the wire).
	injected := app.Wires[0].Stats().RxFrames - wireBefore.RxFrames
	b.ReportMetric(100*(1-float64(after.Ports[0].RxPackets-before.Ports[0].RxPackets)/float64(max(injected, 1))), "model-drop-%")
	b.ReportMetric(100*(1-float64(flow.Received.Load())/float64(max(flow.Sent.Load(), 1))), "loss-%")
	if flow.Received.Load() == 0 {
		b.Fatalf("nothing arrived: sent %d, engine %+v", flow.Sent.Load(), after.Ports)
	}
}
