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
// are attached with link.AttachXDP, a bpf_link (prog.go, counter.go).
//
// Sockets, UMEMs and rings are made on golang.org/x/sys (socket.go
// openXSK, ring_unsafe.go), in the one order every kernel accepts: socket,
// UMEM area and XDP_UMEM_REG, ring sizes, mmap of the four rings, bind.
// asavie/xdp v0.3.3, which made them before, binds inside NewSocket and keeps
// its ring mappings unexported, so its rings had to be mapped a second time
// after bind, which Linux 6.1 refuses (net/xdp/xsk.c xsk_mmap: -EBUSY once
// bound); the rest of it did not fit either: Transmit panics on ENETDOWN,
// Complete throws away the addresses it reclaims, Fill/Receive/GetDescs
// keep per-frame bookkeeping of one socket's UMEM (GetDescs hands out frames
// the engine still holds), Stats panics without an RX ring, Close leaks the
// ring mappings (a closed socket stayed bound), Program.Attach/Detach hang
// in generic mode, and there is no shared-UMEM bind. What replaces each:
//
//   - the TX ring is kicked with a raw sendto whose errors are counted
//     (queue.kick); the rings use atomics (asavie's fences were commented
//     out, correct on amd64 only).
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
//   - bind flags: XDP_USE_NEED_WAKEUP and no mode flag, so the kernel tries
//     zero-copy and falls back to copy by itself; Options.NoZeroCopy adds
//     XDP_COPY.
//   - the XDP programs are attached with a cilium/ebpf bpf_link, which
//     detaches on Close (attachXDP).
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
// // (TestTxBudgetOneKickPerBatch). Ports opened with one Share bind queue q
// to one UMEM (XDP_SHARED_UMEM, share.go), so the engine forwards between
// them without copying (TestSharedUMEMForwardsWithoutCopy); the TX kick
// (copy mode: an skb allocated and filled per frame, veth_xmit, the
// receiver's softirq) and the veth RX path (XDP on an skb, then a copy into
// the UMEM) are the kernel's share of a forwarded frame.
package afxdp
