// Package bench holds ovfwd's side-by-side benchmarks. Fwd measures
// forwarded packets per second of 64-byte UDP through ovfwd (the fwd engine
// on AF_XDP ports, run by the daemon's worker loop, appliance/runner) and
// through Linux's own forwarding, in the same namespace topology with the
// same generator and sink, alternating A B A B.
//
// Threading: Fwd runs the generator threads and the runner (worker and
// control loop) itself and stops all of them before it returns.
package bench
