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
// # Libraries, and what stays hand-written
//
// The XDP programs (steering, and the benchmarks' drop counter) are built
// with cilium/ebpf's asm package, their maps are cilium/ebpf maps, and they
// are attached with link.AttachXDP, a bpf_link, which the kernel detaches
// in whatever mode it was attached when it is closed or the process dies
// (prog.go attachXDP, counter.go).
//
// Sockets, UMEMs and rings are made on golang.org/x/sys (socket.go
// openXSK, ring_unsafe.go), in the one order every kernel accepts: socket,
// UMEM area and XDP_UMEM_REG, ring sizes, mmap of the four rings, bind
// (Linux 6.1 refuses a ring mapping once the socket is bound:
// net/xdp/xsk.c xsk_mmap).
//
//   - the TX ring is kicked with a raw sendto whose errors are counted;
//     ENETDOWN marks the queue down until a kick succeeds (queue.kick).
//     Producer and consumer words are read and written with atomics.
//   - frames are owned through a free stack (queue.free, one per UMEM),
//     O(1) per frame; ports of a Share bind to one UMEM per queue index
//     (XDP_SHARED_UMEM, share.go, joinSocket).
//   - XDP_STATISTICS, XDP_OPTIONS and XDP_MAX_TX_SKB_BUDGET are read and
//     set directly.
//   - Close unmaps the rings before closing the socket
//     (TestNoOrphanRingMappings, TestRingMapFailureCleansUp).
//   - bind meets EBUSY for ~2 s after a previous owner of the queue went
//     away (the kernel frees its buffer pool from deferred work): bind is
//     retried with bounded backoff (openXSK, TestBindRetryAfterRestart).
//   - bind asks for zero-copy explicitly and, refused, binds the same
//     socket in copy mode, so the driver's reason reaches status;
//     Options.NoZeroCopy asks for copy only. Every optional feature a port
//     asks for falls back when refused and its queue mode says so
//     (docs/fallbacks.md, TestFallbacks).
//
// github.com/asavie/xdp is not used: v0.3.3 binds inside NewSocket and keeps
// its ring mappings unexported, so the rings had to be mapped a second time
// after bind, which Linux 6.1 refuses; its Transmit panics on ENETDOWN, its
// Stats panics without an RX ring, Close leaks the ring mappings, detaching
// a generic-mode program hangs, and it has no shared-UMEM bind.
//
// Also hand-written on x/sys: the ethtool channel count (ethtool_unsafe.go)
// and the netlink neighbour mirror (neigh.go), outside both libraries'
// scope. Nothing in the hot path panics or allocates (TestHotPathZeroAllocs,
// BenchmarkTx). TestRingsMappedBeforeBind maps rings the way Linux 6.1 does
// (refused once bound); the systemd guest test (appliance/testbed/vmtest)
// runs the ports on 6.1 itself.
//
// # Per-packet cost
//
// XDP_MAX_TX_SKB_BUDGET (Linux 6.17+) is raised to the TX ring size so one
// sendto drains a whole Tx batch in copy mode instead of 32 frames per call
// (TestTxBudgetKicksPerBatch). Ports opened with one Share bind queue q
// to one UMEM (XDP_SHARED_UMEM, share.go), so the engine forwards between
// them without copying (TestSharedUMEMForwardsWithoutCopy); the TX kick
// (copy mode: an skb allocated and filled per frame, veth_xmit, the
// receiver's softirq) and the veth RX path (XDP on an skb, then a copy into
// the UMEM) are the kernel's share of a forwarded frame.
package afxdp
