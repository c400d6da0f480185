package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd/nat"
)

// failingHandler takes lines but refuses every third, as a log writer
// that cannot keep up (a full journal socket, a blocked pipe) does.
type failingHandler struct{ taken, calls int }

func (h *failingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *failingHandler) Handle(context.Context, slog.Record) error {
	h.calls++
	if h.calls%3 == 0 {
		return errors.New("write: resource temporarily unavailable")
	}
	h.taken++
	return nil
}
func (h *failingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *failingHandler) WithGroup(string) slog.Handler      { return h }

// Every block event reaches the log writer, and each line it fails to
// take is counted: written + lost == events.
func TestBlockLogWriterLossCounted(t *testing.T) {
	n := &natState{rules: []config.NAT{{Name: "vpn"}}, clients: map[netip.Addr]*natClient{}, cnames: map[netip.Addr]string{}}
	h := &failingHandler{}
	out := netip.MustParseAddr("198.18.1.1")
	const events = 1000
	for i := range events / 2 {
		in := netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
		lo := uint16(1024 + 64*(i%900))
		for _, alloc := range []bool{true, false} {
			n.blockEvent(h, nat.Event{Alloc: alloc, Inside: in, Outside: out, PortLo: lo, PortHi: lo + 63}, func(netip.Addr) string { return "cn" })
		}
	}
	lost := n.linesLost.Load()
	if uint64(h.taken)+lost != events || lost == 0 {
		t.Fatalf("%d written + %d lost, want %d events with some lost", h.taken, lost, events)
	}
	if len(n.clients) != 0 {
		t.Errorf("%d clients still booked after every block was released", len(n.clients))
	}
}
