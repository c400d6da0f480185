// Package dpsim is the data path of the mlx5 device model: it consumes
// striding-RQ WQEs for injected frames and writes CQEs (optionally compressed,
// basic layout), consumes send WQEs including enhanced multi-packet WQEs —
// validating every field the way firmware would and failing loudly on a WQE
// that crosses the ring end (or, with the kernel-compat knob, a fragment
// edge) — and delivers frames to a sink or another model port.
//
// Its "DMA" can run without cache injection: with Flush set, packet data is
// written with non-temporal stores and every line the model writes (packet
// data, the shinfo line behind it, CQEs) is evicted with CLFLUSHOPT, so the
// driver meets DRAM misses as on a NIC without DDIO (docs/mlx5.md section
// 3), and the model's writes do not evict the driver's own lines from L1/L2,
// which a NIC's DMA never does. For the same reason a send queue without a
// sink checks its data segments but reads no bytes. Memory comes in two
// layouts: one contiguous hugepage-like region, or buffer pages scattered at
// shuffled places as page_pool pages are.
//
// The model reads and writes buffer memory only through IOVAs and faults on
// anything unmapped. It is synchronous: a doorbell runs the send queue to
// completion before returning, unless the queue is put in deferred mode
// (benchmarks), where Process runs it.
//
// Threading: each model queue is driven from the goroutine of the driver
// queue it serves (the worker that owns queue q); Connect wires queue q of
// one port to queue q of another so a synchronous delivery never crosses
// workers. Nothing here locks.
//
// The package also builds a dp.Port on the model (NewPort, driver
// "mlx5-sim") and hosts the side-by-side benchmark (Bench).
package dpsim
