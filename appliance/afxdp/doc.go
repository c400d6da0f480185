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
// Sockets come from asavie/xdp v0.3.3: xdp.NewSocket creates the socket,
// allocates and registers the UMEM, sizes and maps the rings and binds.
// All four rings are driven through this package's own mappings
// (ring_unsafe.go): asavie's Fill and Receive keep per-frame bookkeeping of
// one socket's UMEM, and it has no shared-UMEM bind, so sockets joining a
// Share's UMEM are made here on x/sys (joinSocket). Its defects are worked
// around where they bite, each with a comment at the spot:
//
//   - Transmit panics on any sendto errno but EAGAIN/EBUSY/EINTR (ENETDOWN
//     when a link goes down), and it is the only exported way to the TX
//     ring. So the rings of asavie's socket are mapped a
//     second time here (ring_unsafe.go) and kicked with a raw sendto whose
//     errors are counted (queue.kick); Transmit is never called. Complete
//     is not used either: it throws away the addresses it reclaims.
//   - Program.Attach/Detach hang in generic mode: never called; the bpf_link
//     detaches on Close (attachXDP). xdp.DefaultXdpFlags is still set once,
//     to XDP_FLAGS_UPDATE_IF_NOEXIST, so a stray Attach elsewhere in the
//     process cannot replace the steering program.
//   - Stats panics on a socket without an RX ring: never called;
//     XDP_STATISTICS is read directly (xdpStatistics).
//   - bind meets EBUSY for ~2 s after a previous owner of the queue went
//     away: NewSocket is retried with bounded backoff (openSocketFlags).
//     asavie flattens the errno with %v, so EBUSY is recognised by its text.
//   - Close (which NewSocket also calls when bind fails) never munmaps the
//     four ring mappings, and each holds the socket file open: a closed
//     socket stayed bound, so every later bind of that queue in the process
//     failed with EBUSY for good, and every failed bind of the retry loop
//     left a socket with its pinned UMEM behind (found here:
//     TestBindRetryWhileHeld failed; TestNoOrphanRingMappings counts 12 such
//     mappings after 3 failed binds without the fix). The mappings of
//     closed AF_XDP sockets are found in /proc/self/maps and unmapped after
//     each Close and failed NewSocket (orphan_unsafe.go).
//   - xdp.DefaultSocketFlags is a package global read by NewSocket. It is
//     set once to XDP_USE_NEED_WAKEUP with no mode flag, so the kernel tries
//     zero-copy and falls back to copy by itself; Options.NoZeroCopy adds
//     XDP_COPY for one NewSocket under a mutex every NewSocket here holds.
//   - GetDescs is not used: asavie marks a frame free as soon as Receive
//     returns it, while the engine still holds it, so GetDescs would hand a
//     frame in flight to Alloc; it also scans every frame linearly per call.
//     Frames are owned through a free stack (queue.free, one per UMEM)
//     instead, O(1) per frame.
//   - asavie's ring accesses are plain loads and stores (its fences are
//     commented out). That is correct on amd64 (TSO) only; this package's
//     own rings use atomics.
//
// Hand-written on golang.org/x/sys, and why: the TX/completion ring
// mapping and the TX kick (above); XDP_STATISTICS, XDP_OPTIONS and
// XDP_MAX_TX_SKB_BUDGET socket options, which asavie does not wrap; the
// ethtool channel count (ethtool_unsafe.go) and the netlink neighbour mirror
// (neigh.go), which are outside both libraries' scope. Nothing in the hot
// path panics or allocates (TestHotPathZeroAllocs, BenchmarkTx).
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
