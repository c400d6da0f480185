// Package runner runs a fwd.Engine the one way ovfwd does: one worker per
// queue index, each on an OS thread of its own pinned to its CPU, running
// every batch to completion, plus the control loop that services the
// engine and hands its events and punted frames on.
//
// The daemon, the namespace labs, the benches and the tests all run an
// engine through Start, so what a bench measures is the loop `ovfwd run`
// runs.
//
// # Threading contract
//
// Worker q alone calls Poll on fwd.Worker q; its goroutine is locked to
// its thread for life (the thread exits with it rather than going back to
// the runtime's pool with a pinned affinity). The control loop is one
// goroutine; the Options callbacks run on it, never on a worker. Stop
// closes one channel that every loop checks between polls.
//
// # Idle workers
//
// A busy worker polls back to back. An adaptive one (the default) spins
// through spinPolls empty polls, so the rest of a burst costs no
// wake-up, then sleeps in poll(2) on queue q's sockets of every port that
// has one (AF_XDP), so a frame wakes it at once and an idle appliance
// costs next to no CPU. Ports without a descriptor (VFIO, the device
// model) make it nap 1 ms instead. The sleep is bounded by idleWait
// because the engine's timers (neighbour retransmits, held packets, ICMP
// tokens) advance only when it polls, and Stop waits for it. Worker 0 can
// also be woken by an eventfd when the control plane injects packets
// (Wake), and with more than one worker each can be woken by the others
// when they hand it packets of a NAT flow it owns (hand.go).
package runner
