// Package daemon is the appliance an operator runs (`ovfwd run -c FILE`):
// it turns one config file into ports, an engine, pinned workers and the
// control plane around them — neighbour mirroring, kernel route sync,
// the status socket, Prometheus metrics, SIGHUP reload and an orderly
// SIGTERM shutdown.
//
// Ports run on AF_XDP or, over VFIO, on ovfwd's mlx5 driver (backend.go
// chooses per port). Other mlx5 backends are registered by the program
// (RegisterMLX5Backend): cmd/ovfwd registers the device model
// (appliance/daemon/mlx5sim, driver "mlx5-sim"), which this package does
// not link.
//
// # Threading contract
//
// Run owns every goroutine it starts and stops all of them before it
// returns. The data plane is the engine's workers, one per queue index,
// each locked to an OS thread pinned to its configured CPU, run by
// appliance/runner (the one worker loop the labs and benches use too);
// nothing in this package touches packets. Everything else is control
// plane:
//
//   - the runner's control loop (one goroutine) calls Engine.Service, and
//     here mirrors the neighbours the workers learned into the kernel,
//     drains punts to the exception TAPs and runs the VPN's timers;
//   - nlsync's goroutines report kernel routes, pinned neighbours and link
//     state; they reach the engine through routeTable and neighbours,
//     each serialised by its own mutex;
//   - the status and metrics servers build snapshots from the engine's
//     atomics and those two tables;
//   - Run's own goroutine handles SIGHUP (reload) and shutdown.
//
// Lock order: routeTable.mu, then the engine's internal lock (taken by its
// methods). neighbours.mu is never held while calling into routeTable.
//
// # Reload (SIGHUP)
//
// Applied at once, without touching ports, workers or VPN sessions:
// [[route]] (diffed against what is installed), [log] level and format,
// [netlink] (resubscribed), [metrics] listen and [status] socket; the
// engine's limits (mss_clamp, icmp_rate, neighbour_reachable,
// neighbour_timeout and the glean_* limits, through Engine.SetLimits, from
// each worker's next poll); and [vpn]'s push_routes, keepalive, reneg_sec, tun_mtu,
// max_half_open, handshake_rate and max_peers up to its start value
// (through control.Server.Reconfigure, for sessions that start from now
// on: established clients keep the options they were pushed, and are
// reaped by the keepalive they were told). Other changes to [appliance]
// (mode, workers, poll, batch, neighbour_hold, bridge_aging), [[port]]
// and [vpn] (sockets, keys, pools, ciphers, [[vpn.client]]) are logged as
// waiting for a restart. A file that does not load is rejected with every
// error logged (file:line:key) and counted in status; the running config
// stays.
//
// # Uplinks ([[vpn.client]])
//
// Each uplink is dialled and kept connected on a kernel UDP socket, and
// its routes lead into it: the workers hand routed packets over bounded
// rings to a pump goroutine that seals and sends them, and the uplink's
// decrypted packets come back through the engine's inject ring, waking
// worker 0 from its idle poll (uplinks.go, runner.Wake). The VPN server's
// [[vpn.iroute]] is the other end for a site whose uplink is an ovfwd.
//
// # Shutdown (SIGTERM)
//
// Uplinks are closed, VPN clients get RESTART (up to 2 s for acknowledgements), the workers
// stop (≤ 20 ms: an idle worker sleeps in poll(2) at most that long), the
// XDP programs are detached and the queues released, and the kernel
// addresses and neighbours ovfwd added are removed.
package daemon
