// Package fullsim joins the two halves of the mlx5 device model into one
// device: the command model (mlx5/model/sim: initialization segment, commands,
// pages, objects, steering) and the data-path engines (mlx5/model/dpsim: striding
// RQ and CQE writer, SQ/eMPWQE consumer). The driver brings the model up
// through mlx5.Open and creates its queues through commands
// (mlx5.NewFwdPort); the engines then serve exactly the objects the command
// model holds, found from their numbers:
//
//   - a send doorbell on a UAR page names an SQ; the SQ must exist in the
//     command model, be RDY and belong to that UAR page, and its ring, CQ and
//     doorbell records are read at the IOVAs given at CREATE_SQ/CREATE_CQ;
//   - every lkey in a WQE is checked against the live mkeys and every IOVA
//     against the DMA mappings (the IOMMU), so a data path that uses memory
//     the driver never mapped fails loudly (Device.Err);
//   - an injected frame passes the vport filter (UC MAC list, promiscuous
//     bits, MTU), is classified by the NIC RX root flow table (sim.Steer), goes
//     to a TIR, through an RQT by Toeplitz hash for RSS TIRs, to an RQ that must
//     be RDY with a cyclic striding WQ, whose engine places it in a stride and
//     writes the CQE to that RQ's CQ.
//
// Steering and queue bindings are cached and revalidated whenever the driver
// rings the command doorbell (any command may change objects), so the
// per-packet path allocates nothing.
//
// # Threading
//
// Send doorbells run on the goroutine that rings them (the worker owning that
// queue) and deliver synchronously to the queue's sink; the send engine of a
// queue is touched only by that worker. Inject may be called from any
// goroutine: receive engines are serialised by the device's lock. Commands
// (bring-up, port creation, Close) must not run while traffic flows, because
// they change the IOMMU view the engines read.
package fullsim
