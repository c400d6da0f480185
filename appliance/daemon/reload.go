package daemon

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ovfwd/ovfwd/config"
)

// reload applies a changed config file without touching the data plane's
// ports or the VPN's established tunnels: logging, static routes, netlink
// sync, status and metrics endpoints change now, and so do the engine's
// limits (MSS clamp, ICMP rate, neighbour timers) and the VPN's
// pushed options, keepalive, renegotiation and admission limits for
// sessions that start from now on; what needs new ports, workers or VPN
// sockets and keys is logged as waiting for a restart. An invalid file is rejected
// with every error logged, and the running config stays.
//
// Only Run's goroutine calls reload; d.mu is taken only to publish the
// new config and counters, never while a server is being stopped (its
// handlers take d.mu to build snapshots).
func (d *daemon) reload() {
	nc, err := config.Load(d.path)
	if err != nil {
		d.rejectReload(err)
		return
	}
	d.mu.Lock()
	old := d.cfg
	d.mu.Unlock()
	static, err := staticRoutes(nc, d.portIndex)
	if err != nil {
		d.rejectReload(err)
		return
	}
	if _, err := natCompile(nc, d.portIndex); err != nil {
		d.rejectReload(err)
		return
	}
	if _, err := aclCompile(nc, d.portIndex, len(d.ports)); err != nil {
		d.rejectReload(err)
		return
	}
	// Engine limits and VPN tunables go first, so that a refusal leaves
	// everything as it was. Both refuse only values config.Load already
	// rejects, so the second cannot fail after the first applied.
	if err := d.engine.SetLimits(engineLimits(engineConfig(nc.Appliance, old.VPN.Enabled))); err != nil {
		d.rejectReload(err)
		return
	}
	if len(nc.NAT) > 0 || d.nat != nil {
		// Rules the new file leaves as they were keep their sessions.
		if err := d.applyNAT(nc); err != nil {
			d.rejectReload(err)
			return
		}
	}
	if err := d.applyACL(nc); err != nil { // compiled above: cannot fail here
		d.log.Error("access lists not applied", "err", err)
	}
	pending := restartOnly(d.started0, nc)
	if d.vpn != nil && nc.VPN.Enabled {
		maxPeersPending, err := d.vpn.reconfigure(&nc.VPN)
		if err != nil {
			d.rejectReload(err)
			return
		}
		if maxPeersPending {
			pending["[vpn] max_peers above the start value"] = nc.VPN.MaxPeers
		}
	}
	if d.logs != nil {
		d.logs.apply(nc.Log)
	}
	d.fib.replace(srcStatic, static)
	if nc.Netlink != old.Netlink || d.nl == nil {
		if d.nl != nil {
			d.nl.Close()
			d.nl = nil
		}
		// The new subscription replays the table it mirrors.
		d.kq.reset(d.fib)
		if err := d.startNetlink(nc.Netlink); err != nil {
			d.log.Error("netlink sync not restarted", "err", err)
		}
	}
	restart := config.Config{}
	if nc.Status != old.Status {
		if d.status != nil {
			d.status.Close()
			d.status = nil
		}
		restart.Status = nc.Status
	}
	if nc.Metrics != old.Metrics {
		for _, m := range d.metrics {
			m.Close()
		}
		d.metrics = nil
		restart.Metrics = nc.Metrics
	}
	if err := d.startServers(&restart); err != nil {
		d.log.Error("status/metrics endpoint not restarted", "err", err)
	}
	d.reloadMonitoring(nc)
	if news := d.newlyPending(pending); len(news) > 0 {
		d.log.Warn("changes that take effect at the next restart", "sections", strings.Join(news, ", "))
	}
	d.mu.Lock()
	d.cfg = nc
	d.rl.Count++
	d.rl.Last = time.Now()
	d.mu.Unlock()
	d.log.Info("reloaded", "config", d.path, "static_routes", len(static))
}

func (d *daemon) rejectReload(err error) {
	var list config.ErrorList
	if errors.As(err, &list) {
		for _, e := range list {
			d.log.Error("config error", "file", e.File, "line", e.Line, "key", e.Key, "problem", e.Msg, "fix", e.Fix)
		}
	}
	d.log.Error("reload rejected; still running the previous config", "config", d.path, "err", err)
	d.mu.Lock()
	d.rl.Failed++
	d.rl.LastError = err.Error()
	d.mu.Unlock()
}

// restartOnly maps the sections whose changes need new ports, workers or
// engine parameters, which a reload does not rebuild, to their new value.
// old is the config the running ports and engine were built from.
func restartOnly(old, nc *config.Config) map[string]any {
	out := map[string]any{}
	if a := applianceRestartPart(nc.Appliance); !reflect.DeepEqual(applianceRestartPart(old.Appliance), a) {
		out["[appliance]"] = a
	}
	if !reflect.DeepEqual(old.Ports, nc.Ports) {
		out["[[port]]"] = nc.Ports
	}
	if v := vpnRestartPart(nc.VPN); !reflect.DeepEqual(vpnRestartPart(old.VPN), v) {
		out["[vpn]"] = v
	}
	if nc.NATOptions.MaxSessions > old.NATOptions.MaxSessions && len(old.NAT) > 0 {
		out["[nat_options] max_sessions above the start value"] = nc.NATOptions.MaxSessions
	}
	if !reflect.DeepEqual(old.Export, nc.Export) {
		out["[export]"] = nc.Export
	}
	return out
}

// newlyPending returns the sections of pending not already reported with
// the same value by an earlier reload, sorted, and remembers pending: a
// change waiting for a restart is said once, and said again only if it
// changes again (a change reverted is simply no longer pending).
func (d *daemon) newlyPending(pending map[string]any) []string {
	var out []string
	for sec, v := range pending {
		if w, ok := d.restartWarned[sec]; !ok || !reflect.DeepEqual(w, v) {
			out = append(out, sec)
		}
	}
	d.restartWarned = pending
	slices.Sort(out)
	return out
}
