package daemon

import (
	"log/slog"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
)

// fastState is the XDP fast path of the AF_XDP ports ([appliance]
// fast_path): the shared maps, the syncer that mirrors the engine's tables
// into them from the control loop, and which ports have it on.
type fastState struct {
	fp     *afxdp.FastPath
	sync   *afxdp.FastSync
	on     []bool // by port index
	target []int  // by port index: the redirect target when its link is up (0: never)
	down   []bool // by port index: link down as of the last sync
	gen    fwd.FastGen
	at     time.Time
	clamp  uint16
	failed bool   // last Apply failed (logged once until it succeeds)
	aclOff []bool // by port index: fast path off while an [[acl]] filters the port (fastACL)

	bridge bool     // bridge mode: mirror the learned MACs, not the FIB
	pvid   []uint16 // by port index: the untagged VLAN the port's program has
	walked time.Time
	bgen   uint64 // fwd.Engine.FastBridgeGen at the last good walk
}

// fastRefresh bounds how stale the fast path's neighbour ageing may be:
// the view is rebuilt at least this often even when no table changed
// (learned neighbours age in place).
const fastRefresh = time.Second

// The bridge mirror (runFastBridge) looks every fastBridgePoll for a
// station learned or moved (the forwarding database's generation) or a
// link change, and then reads the whole table, at most every
// fastBridgeMinGap unless a link changed (a walk of 64 Ki slots costs
// about a millisecond); fastRefresh bounds ageing (a MAC is left out in
// its last seconds).
const (
	fastBridgePoll   = 10 * time.Millisecond
	fastBridgeMinGap = 20 * time.Millisecond
)

// newFastMaps is afxdp.NewFastPath; tests replace it to inject the
// kernel's refusal of the maps.
var newFastMaps = afxdp.NewFastPath

// newFastPath makes the maps when the config may use them; nil otherwise,
// and nil when the kernel refuses them: the workers forward everything.
func newFastPath(a config.Appliance, log *slog.Logger) (*afxdp.FastPath, error) {
	if (a.Mode != config.ModeRouter && a.Mode != config.ModeBridge) || a.FastPath == config.FastPathOff {
		return nil, nil
	}
	fp, err := newFastMaps()
	if err != nil {
		log.Warn("xdp fast path", "on", false, "why", "the kernel refused its maps", "err", err)
	}
	return fp, nil
}

// startFastPath turns the fast path on per port and builds the syncer, once
// the engine and the ports' addresses exist. Every AF_XDP port is a
// redirect target; ingress is on for copy-mode ports (auto) or all (xdp).
func (d *daemon) startFastPath(fp *afxdp.FastPath, a config.Appliance) error {
	ifs := make([]int, len(d.ports))
	have := false
	for i, pt := range d.ports {
		if pt.xdp == nil {
			continue
		}
		have = true
		// A frame redirected out of a veth lands in its peer's receive
		// queue only when the peer runs NAPI (an XDP program or GRO on the
		// peer; drivers/net/veth.c veth_xdp_xmit drops it otherwise), which
		// cannot be seen from this side. So a veth is a redirect target
		// only when the operator says so (fast_path = "xdp").
		if veth(pt) && a.FastPath != config.FastPathXDP {
			d.log.Info("xdp fast path: not sending out of a veth (its peer may have no NAPI); fast_path = \"xdp\" does", "port", pt.cfg.Name)
			continue
		}
		ifs[i] = pt.ifindex
	}
	if !have {
		return fp.Close()
	}
	s, err := afxdp.NewFastSync(fp, ifs)
	if err != nil {
		fp.Close()
		return err
	}
	d.fast = &fastState{fp: fp, sync: s, on: make([]bool, len(d.ports)), clamp: uint16(a.MSSClamp),
		target: ifs, down: make([]bool, len(d.ports)), bridge: a.Mode == config.ModeBridge, pvid: make([]uint16, len(d.ports))}
	var bv fwd.FastBridgeView
	if d.fast.bridge {
		bv = d.engine.FastBridge()
	}
	for i, pt := range d.ports {
		if pt.xdp == nil {
			continue
		}
		if err := pt.xdp.FastRefused(); err != nil {
			d.log.Warn("xdp fast path", "port", pt.cfg.Name, "on", false, "why", "the kernel refused the program with it; steering without", "err", err)
			continue
		}
		on, why := true, "copy mode"
		if a.FastPath == config.FastPathXDP {
			why = "fast_path = xdp"
		} else {
			for _, m := range pt.xdp.Modes() {
				if m.ZeroCopy {
					on, why = false, "zero-copy port (fast_path = xdp turns it on)"
				}
			}
		}
		if d.fast.bridge {
			d.fast.pvid[i] = bv.Ports[i].PVID
			if err := pt.xdp.SetFastBridge(on, i, d.fast.pvid[i]); err != nil {
				return err
			}
		} else if err := pt.xdp.SetFast(on, a.MSSClamp != 0); err != nil {
			return err
		}
		d.fast.on[i] = on
		d.log.Info("xdp fast path", "port", pt.cfg.Name, "on", on, "why", why)
	}
	if d.fast.bridge {
		d.syncFastBridge(true)
		d.control.Add(1)
		go func() { defer d.control.Done(); d.runFastBridge() }()
		return nil
	}
	d.syncFast(true)
	return nil
}

// fastTargets takes a port whose link went down out of the redirect
// targets (its frames go to the workers, which count them as link_down)
// until it comes back; it reports whether any changed.
func (d *daemon) fastTargets() bool {
	f := d.fast
	moved := false
	for i, pt := range d.ports {
		if f.target[i] == 0 {
			continue
		}
		if down := !pt.up.Load(); down != f.down[i] {
			f.down[i], moved = down, true
			if down {
				f.sync.SetTarget(i, 0)
			} else {
				f.sync.SetTarget(i, f.target[i])
			}
		}
	}
	return moved
}

// syncFast mirrors the engine's tables into the fast path when they
// changed, when force (a neighbour event) or when fastRefresh passed, and
// the MSS clamp into the ports.
func (d *daemon) syncFast(force bool) {
	f := d.fast
	if f == nil || f.bridge { // the bridge has its own loop (runFastBridge)
		return
	}
	d.fastACL()
	moved := d.fastTargets()
	gen := d.engine.FastGen()
	if !force && !moved && gen == f.gen && time.Since(f.at) < fastRefresh {
		return
	}
	v := d.engine.FastView()
	if v.MSSClamp != f.clamp {
		for i, pt := range d.ports {
			if f.on[i] {
				if err := pt.xdp.SetFast(true, v.MSSClamp != 0); err != nil {
					d.log.Error("xdp fast path: mss clamp", "port", pt.cfg.Name, "err", err)
				}
			}
		}
		f.clamp = v.MSSClamp
	}
	if err := f.sync.Apply(v); err != nil {
		if !f.failed {
			d.log.Error("xdp fast path: writing the tables", "err", err)
		}
		f.failed = true
		f.gen = fwd.FastGen{} // retried next tick
		return
	}
	f.failed = false
	f.gen, f.at = gen, time.Now()
}

// runFastBridge is the bridge mirror's loop, until the daemon stops.
func (d *daemon) runFastBridge() {
	tk := time.NewTicker(fastBridgePoll)
	defer tk.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-tk.C:
			d.syncFastBridge(false)
		}
	}
}

// syncFastBridge mirrors the bridge's learned MACs and the ports'
// untagged VLANs (a reload may change them) when a station was learned or
// moved, a link changed, fastRefresh passed, or force.
func (d *daemon) syncFastBridge(force bool) {
	f := d.fast
	moved := d.fastTargets()
	// A reload that changes a port's VLANs publishes new tables.
	if tg := d.engine.FastGen(); tg != f.gen {
		f.gen, moved = tg, true
	}
	gen, since := d.engine.FastBridgeGen(), time.Since(f.walked)
	if !force && !moved && since < fastRefresh && (gen == f.bgen || since < fastBridgeMinGap) {
		return
	}
	f.walked = time.Now()
	v := d.engine.FastBridge()
	for i, pt := range d.ports {
		if f.on[i] && i < len(v.Ports) && v.Ports[i].PVID != f.pvid[i] {
			if err := pt.xdp.SetFastBridge(true, i, v.Ports[i].PVID); err != nil {
				d.log.Error("xdp fast path: untagged VLAN", "port", pt.cfg.Name, "err", err)
				continue
			}
			f.pvid[i] = v.Ports[i].PVID
		}
	}
	if err := f.sync.ApplyBridge(v); err != nil {
		if !f.failed {
			d.log.Error("xdp fast path: writing the learned MACs", "err", err)
		}
		f.failed = true
		f.bgen = gen - 1 // retried after fastBridgeMinGap
		return
	}
	f.failed = false
	f.bgen = gen // read before the walk: what changed during it moves it again
}

// veth reports whether the port's kernel interface is a veth.
func veth(pt *port) bool {
	l, err := netlink.LinkByIndex(pt.ifindex)
	return err == nil && l.Type() == "veth"
}
