package fwd

import (
	"fmt"
	"net/netip"
)

// SetSingleLookup makes w look up each routed packet on its own (true) or
// the whole received batch at once (false, the default), so benchmarks can
// compare the two paths in one process.
func (w *Worker) SetSingleLookup(on bool) {
	w.fib.max = w.e.cfg.Batch
	if on {
		w.fib.max = 0
	}
}

// FIB is the published forwarding table, prefix → adjacency, so tests can
// compare two engines' tables whatever order they interned adjacencies in.
func (e *Engine) FIB() map[netip.Prefix]string {
	t := e.tables.Load()
	m := map[netip.Prefix]string{}
	t.v4.Walk(func(p netip.Prefix, v uint32) bool { m[p] = fmt.Sprintf("%+v", t.adj[v]); return true })
	t.v6.Walk(func(p netip.Prefix, v uint32) bool { m[p] = fmt.Sprintf("%+v", t.adj[v]); return true })
	return m
}

// FlagPseudoCsum is Parse's mark for a transport checksum that holds the
// pseudo-header sum; FinishPartialCsum is the router's full test and fix.
const FlagPseudoCsum = flagPseudoCsum

func FinishPartialCsum(p *Packet) bool { return finishPartialCsum(p) }
