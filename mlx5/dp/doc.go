// Package dp is the mlx5 data path: a linear striding receive queue with
// stride-ahead prefetch and CQE (de)compression, and a send queue that packs
// packets into enhanced multi-packet WQEs (opcode 0x29) sized to the room left
// before each ring fragment edge.
//
// Queues are built from plain memory and numbers (rings, doorbell records,
// queue numbers, lkey, a doorbell writer), exactly what object creation in
// package mlx5 hands out (mlx5/queues.go), so the same code runs on VFIO
// hugepages and on the device model in mlx5/model/dpsim.
//
// # Threading contract
//
// Worker q owns queue q of every port: RxQueue.Rx, TxQueue.Tx, and the
// Free/Alloc of that queue's buffer pool are called from that one goroutine
// only. Nothing here locks, allocates, calls time.Now or makes an interface
// call per packet; the doorbell writer is called once per Tx batch. Buffer
// reference counts are plain integers for the same reason: the RX queue, its
// buffer pool and the TX queue that sends those buffers all belong to one
// worker. Counters are plain fields, read by the control plane only through
// snapshots taken by the worker (or after it stopped).
//
// # Memory ordering
//
// Toward the device: WQE stores, then the doorbell record (an atomic store,
// which orders it after the WQE stores on amd64's TSO), then the 8-byte MMIO
// doorbell. From the device: the CQE's owner byte is loaded atomically before
// any other CQE byte is read (kernel en/txrx.h mlx5e_notify_hw: dma_wmb,
// doorbell record, wmb, MMIO; wq.h mlx5_cqwq_get_cqe: owner, dma_rmb, body).
package dp
