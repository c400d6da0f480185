// Package exctap is the exception path of a port ovfwd owns outright
// (VFIO, mlx5-sim): the kernel never sees that NIC, so without help the
// box's own addresses would be unreachable (no ARP, no SSH). A TAP device
// per port, carrying the port's MAC, MTU and addresses, stands in for the
// NIC on the host's side:
//
//	wire → engine → Engine.Punts → TAP.Deliver → TAP device → host stack
//	host stack → TAP device → Engine.Inject → worker 0 → wire
//
// The engine answers ARP/ND and pings itself and routes transit traffic;
// it punts what is addressed to the box and it does not handle (TCP, UDP
// other than the VPN port, fragments, multicast) and, with
// Engine.SetHostCopies, a copy of every ARP/ND packet so the host learns
// its neighbours and hears answers to its own solicitations.
//
// # Threading
//
// Deliver may be called from any goroutine (normally the one draining
// Engine.Punts): it copies the frame into a bounded queue and never
// blocks; a full queue drops the frame and counts it. Start runs two
// goroutines per TAP: a writer moving the queue into the device, and a
// reader moving what the host sends into Injector.Inject (which never
// blocks either; refusals are counted). Close stops both and closes the
// device; it is safe to call twice and Deliver after Close is a counted
// drop.
package exctap
