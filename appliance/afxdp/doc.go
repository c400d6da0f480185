// Package afxdp is ovfwd's portable backend: an fwd.Port over AF_XDP sockets
// on any Linux interface, plus the small XDP program that decides, per frame,
// whether ovfwd or the kernel handles it.
//
// # Threading contract
//
// A Port has one AF_XDP socket, one UMEM and one set of rings per queue.
// Queue q (Rx, Tx, Alloc, Free with index q) is used by worker q only, so
// the per-queue path takes no lock and never allocates. Open, Close,
// SetLocal, Stats and Modes belong to the control plane; Stats reads
// counters the workers publish with atomic adds once per batch.
//
// # Why not asavie/xdp and cilium/ebpf here
//
// The socket, the rings, the BPF maps, the program and its bpf_link are
// written against golang.org/x/sys only. asavie/xdp's Transmit panics on
// ENETDOWN and is the only way to reach its TX ring, its Detach hangs in
// generic mode and its Stats panics without an RX ring (feasibility.md §1),
// so everything but its NewSocket would have to be bypassed anyway; and the
// repository's go.mod does not require either module yet, so this package
// stays buildable on its own. The workarounds the defects call for are still
// here, each commented where it lives: TX kicks that count ENETDOWN, ENXIO
// and ENOBUFS instead of panicking (kick.go), detach by closing a bpf_link
// (prog.go), XDP_STATISTICS read directly (stats.go) and a bounded retry of
// bind on EBUSY (socket.go).
package afxdp
