// Package mlx5 is ovfwd's userspace driver for NVIDIA/Mellanox ConnectX-4 Lx
// and later NICs over VFIO: the VFIO layer, the command interface, function
// bring-up and teardown, capability discovery, and creation of the objects
// the data path (mlx5/dp) runs on. The device model in mlx5/model/sim stands
// behind the same seams (MMIO, DMA, Config in seams.go), so the code here is
// exercised byte for byte in tests.
//
// # Threading contract
//
// An HCA (one PCI function) is driven by one goroutine at a time: Open,
// object creation and destruction, Close, PollEvents and CheckHealth are
// control-plane calls that must not run concurrently on the same HCA (they
// share the command queue and the async EQ). They block while a command
// runs, polling its ownership bit, and service firmware page requests that
// arrive meanwhile. The queue structs of queues.go are handed to the data
// path, whose worker q owns queue q; nothing in this package touches a ring
// after creating it until it is destroyed.
package mlx5
