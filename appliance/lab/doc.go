// Package lab builds ovfwd's namespace lab — host A ⇄ appliance ⇄ host B
// joined by veth pairs — runs the fwd engine on the appliance's AF_XDP
// ports, drives traffic between the hosts and prints live counters. It is
// what `ovfwd lab` and `sudo make lab` run, and the fixture of the
// privileged forwarding tests.
//
// Threading: Run owns everything it starts (engine workers, control loop,
// traffic goroutines) and stops all of it before returning. An Appliance's
// methods are control plane and may be called from any goroutine.
package lab
