// Package simlab is the namespace lab with the appliance running on the
// mlx5 device model (driver "mlx5-sim"): host A ⇄ veth ⇄ [appliance
// namespace: the veth end plugged by a fullsim.Wire into model port 0,
// model port 1 plugged into the next veth] ⇄ veth ⇄ host B. Every frame
// between the hosts crosses the whole modelled stack twice: the model's
// vport filter, steering and RSS, the driver's striding RQ and CQEs, the
// fwd engine, the driver's send queue and the model's SQ engine.
//
// The appliance namespace's veth ends carry no address and no IPv6: the
// kernel there stays out of the way; ovfwd answers ARP/ND and routes.
//
// # Threading
//
// Start runs one fwd worker per model queue (adaptive polling, so an idle
// lab does not spin), a control goroutine (Engine.Service every 50 ms) and
// two goroutines per wire. Close stops the workers first, then unplugs
// the wires, then closes the ports, so the model is never torn down under
// traffic.
package simlab
