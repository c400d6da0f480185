// Package bench holds ovfwd's side-by-side benchmarks. Fwd measures
// forwarded packets per second of 64-byte UDP through ovfwd (the fwd engine
// on AF_XDP ports) and through Linux's own forwarding, in the same namespace
// topology with the same generator and sink, alternating A B A B.
//
// Threading: Fwd runs the generator threads, the engine's worker and its
// control loop itself and stops all of them before it returns.
package bench
