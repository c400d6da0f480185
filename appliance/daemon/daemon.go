package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/exctap"
	"github.com/ovfwd/ovfwd/appliance/metrics"
	"github.com/ovfwd/ovfwd/appliance/nlsync"
	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
)

const (
	// serviceInterval is the control loop's period: neighbour learning and
	// expiry, kernel mirroring and punt draining happen at this pace.
	serviceInterval = 50 * time.Millisecond
	// tapServiceInterval replaces it when exception TAPs carry the host's
	// traffic, whose frames wait in the punt rings between passes.
	tapServiceInterval = 5 * time.Millisecond
	// stopBudget bounds how long the workers and control loop get to stop;
	// SIGTERM must end the process within 5 s with the ports released.
	stopBudget = 3 * time.Second
)

// daemon is one running appliance.
type daemon struct {
	path    string
	log     *slog.Logger
	logs    *logSwitch // nil when Run was given a logger
	rateLog *rateLog   // d.log's handler: repeated lines summarised
	started time.Time
	version string

	mu  sync.Mutex // guards cfg, reloads and the servers a reload restarts
	cfg *config.Config
	rl  status.Reload

	// started0 is the config the ports, workers and engine were built
	// from; restartWarned what reload last said waits for a restart.
	started0      *config.Config
	restartWarned map[string]any

	ports   []*port
	engine  *fwd.Engine
	fib     *routeTable
	neigh   *neighbours
	mirror  *nlsync.NeighMirror
	fast    *fastState // nil without the XDP fast path
	nl      *nlsync.Sync
	kq      *kernelQueue // kernel routes from nl, applied in batches
	status  *status.Server
	metrics []*metrics.Server // TCP and/or unix socket
	vpn     *vpnServer        // nil unless [vpn] enabled
	uplinks *uplinks          // nil without [[vpn.client]]
	nat     *natState         // nil until [[nat]] rules are first applied
	wake    *runner.Wake      // wakes worker 0 for the uplinks' injected packets; nil without uplinks
	taps    exctap.Ports      // exception TAPs of vfio/mlx5-sim ports, by port index; nil without any
	runner  *runner.Runner    // the workers and the control loop; nil until started
	cpus    []int             // cpus[q]: worker q's CPU, -1 when not pinned
	beats   []heartbeat       // beats[q]: worker q's loop counter
	so      *scaleOut         // readiness, drain and route export
	mon     *monitoring       // management interface and status file (mgmt.go)
	notify  *notifier         // systemd's notify socket; nil outside systemd

	aclMu sync.Mutex
	acl   *aclState // nil without [[acl]] (under aclMu)

	stop    chan struct{}  // stops the daemon's own goroutines (the kernel route queue)
	control sync.WaitGroup // those goroutines
}

// Version is reported by status; cmd/ovfwd sets it from its build version.
var Version = "dev"

// Run loads the config at cfgPath and runs the appliance until ctx is
// done (the command cancels it on SIGTERM or SIGINT), reloading on SIGHUP.
// A nil logger logs to stderr as [log] says, and follows [log] on reload;
// a given logger is used as is. Run returns the config's errors (a
// config.ErrorList) when the file is invalid, and nil after a clean stop.
func Run(ctx context.Context, cfgPath string, logger *slog.Logger) error {
	// Take SIGHUP before anything else: its default action ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	d := &daemon{path: cfgPath, started: time.Now(), version: Version, stop: make(chan struct{})}
	if logger == nil {
		d.logs = newLogSwitch(os.Stderr, stderrIsJournal(), cfg.Log)
		logger = slog.New(d.logs)
	}
	d.rateLog = newRateLog(d.logHistory(logger.Handler()))
	d.log = slog.New(d.rateLog)
	if err := d.start(cfg); err != nil {
		d.log.Error("start failed", "err", err)
		d.shutdown()
		return err
	}
	d.log.Info("running", "config", cfgPath, "mode", cfg.Appliance.Mode, "ports", len(d.ports),
		"workers", len(d.engine.Workers()), "poll", cfg.Appliance.Poll, "pid", os.Getpid())
	d.startNotify()
	for {
		select {
		case <-ctx.Done():
			d.log.Info("stopping", "reason", context.Cause(ctx))
			return d.shutdown()
		case <-hup:
			d.reload()
		}
	}
}

// start brings the appliance up, each subsystem on the ones before it:
// ports and the engine, routes, neighbours, the fast path, the VPN server
// and uplinks, NAT, exception TAPs, the workers, the kernel's routes and
// neighbours, the status and metrics servers, scale-out. On error, shutdown
// releases what started.
func (d *daemon) start(cfg *config.Config) error {
	d.cfg, d.started0 = cfg, cfg
	d.so = newScaleOut(cfg.Export)
	fast, err := d.startPorts(cfg)
	if err != nil {
		return err
	}
	if err := d.startRoutes(cfg); err != nil {
		return err
	}
	if err := d.startNeighbours(); err != nil {
		return err
	}
	// Before the fast path: a port an [[acl]] filters never has it on.
	if err := d.applyACL(cfg); err != nil {
		return err
	}
	if fast != nil {
		if err := d.startFastPath(fast, cfg.Appliance); err != nil {
			return err
		}
	}
	if err := d.startTunnels(cfg); err != nil {
		return err
	}
	if len(cfg.NAT) > 0 {
		if err := d.applyNAT(cfg); err != nil {
			return err
		}
	}
	if err := d.startExceptionTAPs(cfg); err != nil {
		return err
	}
	if err := d.startWorkers(cfg.Appliance); err != nil {
		return err
	}
	if err := d.startKernelSync(cfg.Netlink); err != nil {
		return err
	}
	if err := d.startServers(cfg); err != nil {
		return err
	}
	if err := d.startMonitoring(cfg); err != nil {
		return err
	}
	return d.startScaleOut()
}

// startTunnels starts the VPN server and the uplinks ([[vpn.client]]),
// with the wake-up through which both hand worker 0 packets.
func (d *daemon) startTunnels(cfg *config.Config) error {
	if !cfg.VPN.Enabled && len(cfg.VPN.Clients) == 0 {
		return nil
	}
	var err error
	if d.wake, err = runner.NewWake(d.engine); err != nil {
		return err
	}
	if cfg.VPN.Enabled {
		if d.vpn, err = d.startVPN(&cfg.VPN); err != nil {
			return err
		}
	}
	if len(cfg.VPN.Clients) > 0 {
		for _, c := range cfg.VPN.Clients {
			d.fib.uplinkNames = append(d.fib.uplinkNames, c.Name)
		}
		d.fib.replace(srcUplink, uplinkRoutes(cfg.VPN.Clients))
		d.uplinks = startUplinks(cfg.VPN.Clients, d.wake, d.log)
	}
	return nil
}

// vpnNeighHold is the least neighbour_hold with the VPN server on. Many
// clients behind one next hop make one unresolved neighbour the target of
// a whole burst of handshake replies; 4 held packets dropped most of them
// as neighbour_full while ARP resolved. The cost is bounded by the
// engine's 32 unresolved neighbours per worker: at most 32×64 frames held
// for one resolution attempt (neighbour_timeout), then released or freed.
const vpnNeighHold = 64

// engineConfig maps [appliance] onto the engine's knobs; with the VPN
// server on, neighbour_hold is at least vpnNeighHold.
func engineConfig(a config.Appliance, vpnOn bool) fwd.Config {
	c := fwd.Config{
		Batch:          a.Batch,
		MSSClamp:       uint16(a.MSSClamp),
		ICMPRate:       a.ICMPRate,
		NeighReachable: a.NeighbourReachable,
		// neighbour_timeout is the whole resolution attempt: three probes.
		NeighProbes:      3,
		NeighRetrans:     max(a.NeighbourTimeout/3, 10*time.Millisecond),
		NeighProbeBefore: min(5*time.Second, a.NeighbourReachable/2),
		NeighHold:        a.NeighbourHold,
		NeighTable:       a.NeighbourTable,
		GleanSourceRate:  a.GleanSourceRate,
		GleanSourceBurst: a.GleanSourceBurst,
		GleanPortRate:    a.GleanPortRate,
		GleanPortBurst:   a.GleanPortBurst,
		BridgeAging:      a.BridgeAging,
	}
	if a.ICMPRate == 0 {
		c.ICMPRate = -1 // the engine's "none"; its 0 means "default"
	}
	if a.NeighbourHold == 0 {
		c.NeighHold = 1 // the engine cannot hold none; 0 would mean its default of 4
	}
	if vpnOn {
		c.NeighHold = max(c.NeighHold, vpnNeighHold)
	}
	if a.Mode == config.ModeBridge {
		c.Mode = fwd.ModeBridge
	}
	return c
}

// engineLimits is the part of engineConfig a reload may change while the
// workers run (fwd.Engine.SetLimits).
func engineLimits(c fwd.Config) fwd.Limits {
	return fwd.Limits{
		MSSClamp: c.MSSClamp, ICMPRate: c.ICMPRate, ICMPBurst: c.ICMPBurst,
		NeighReachable: c.NeighReachable, NeighProbeBefore: c.NeighProbeBefore,
		NeighRetrans: c.NeighRetrans, NeighProbes: c.NeighProbes,
		GleanSourceRate: c.GleanSourceRate, GleanSourceBurst: c.GleanSourceBurst,
		GleanPortRate: c.GleanPortRate, GleanPortBurst: c.GleanPortBurst,
	}
}

// applianceRestartPart is [appliance] without what engineLimits covers.
func applianceRestartPart(a config.Appliance) config.Appliance {
	a.MSSClamp, a.ICMPRate, a.NeighbourReachable, a.NeighbourTimeout = 0, 0, 0, 0
	a.GleanSourceRate, a.GleanSourceBurst, a.GleanPortRate, a.GleanPortBurst = 0, 0, 0, 0
	return a
}

// shutdown stops everything start started, in reverse, within the
// SIGTERM budget: no more kernel updates, workers and control loop
// stopped, XDP programs detached, queues released, kernel addresses and
// neighbours ovfwd added removed.
func (d *daemon) shutdown() error {
	var errs []error
	d.stopNotify()
	// The routing daemon withdraws the pools before the tunnels go.
	errs = append(errs, d.stopScaleOut())
	d.stopMonitoring()
	if d.status != nil {
		errs = append(errs, d.status.Close())
	}
	for _, m := range d.metrics {
		errs = append(errs, m.Close())
	}
	if d.nl != nil {
		d.nl.Close()
	}
	if d.uplinks != nil {
		d.uplinks.close()
	}
	if d.vpn != nil {
		// Clients get RESTART while the data path still runs, so they
		// reconnect at once instead of waiting for ping-restart.
		errs = append(errs, d.vpn.close())
	}
	close(d.stop)
	d.control.Wait()
	if d.runner != nil {
		if err := d.runner.Stop(stopBudget); err != nil {
			// A worker that does not stop still owns its queues: closing them
			// under it would be a use-after-unmap. Leave them to the kernel,
			// which detaches the program when the process exits.
			d.log.Error("workers did not stop in time; leaving their ports to process exit", "budget", stopBudget)
			return err
		}
	}
	d.closeExceptionTAPs()
	if d.wake != nil {
		_ = d.wake.Close()
	}
	if d.neigh != nil {
		d.neigh.removeMirrored()
	}
	for _, pt := range d.ports {
		if err := pt.close(d.log); err != nil {
			errs = append(errs, fmt.Errorf("port %s: %w", pt.cfg.Name, err))
		}
	}
	if d.mirror != nil {
		errs = append(errs, d.mirror.Close())
	}
	if d.fast != nil {
		errs = append(errs, d.fast.fp.Close())
	}
	err := errors.Join(errs...)
	if err != nil {
		d.log.Error("stopped with errors", "err", err)
	} else {
		d.log.Info("stopped", "ports_released", len(d.ports))
	}
	return err
}
