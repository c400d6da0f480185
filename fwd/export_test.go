package fwd

// SetSingleLookup makes w look up each routed packet on its own (true) or
// the whole received batch at once (false, the default), so benchmarks can
// compare the two paths in one process.
func (w *Worker) SetSingleLookup(on bool) { w.fib.single = on }
