package fwd

import (
	"errors"
	"time"
)

// Limits are the engine knobs a running engine can change (SetLimits):
// the MSS clamp, the ICMP error rate, the neighbour timers and the glean
// limits. Fields mean
// what the Config fields of the same names mean, zeros included.
//
// Workers copy the published Limits at the start of a poll when the
// pointer changed, so a change costs one pointer compare per poll and
// nothing per packet; a packet sees either the old or the new Limits,
// never a mix.
type Limits struct {
	MSSClamp         uint16
	ICMPRate         int
	ICMPBurst        int
	NeighReachable   time.Duration
	NeighProbeBefore time.Duration
	NeighRetrans     time.Duration
	NeighProbes      int
	GleanSourceRate  int
	GleanSourceBurst int
	GleanPortRate    int
	GleanPortBurst   int
}

func (c *Config) limits() *Limits {
	return &Limits{
		MSSClamp: c.MSSClamp, ICMPRate: c.ICMPRate, ICMPBurst: c.ICMPBurst,
		NeighReachable: c.NeighReachable, NeighProbeBefore: c.NeighProbeBefore,
		NeighRetrans: c.NeighRetrans, NeighProbes: c.NeighProbes,
		GleanSourceRate: c.GleanSourceRate, GleanSourceBurst: c.GleanSourceBurst,
		GleanPortRate: c.GleanPortRate, GleanPortBurst: c.GleanPortBurst,
	}
}

// Limits returns the limits in effect.
func (e *Engine) Limits() Limits { return *e.limits.Load() }

// SetLimits publishes new limits to every worker (from its next poll)
// and to the control plane. Zero fields take New's defaults.
func (e *Engine) SetLimits(l Limits) error {
	if l.ICMPBurst < 0 || l.NeighReachable < 0 || l.NeighProbeBefore < 0 || l.NeighRetrans < 0 || l.NeighProbes < 0 ||
		l.GleanSourceRate < 0 || l.GleanSourceBurst < 0 || l.GleanPortRate < 0 || l.GleanPortBurst < 0 {
		return errors.New("fwd: negative limit")
	}
	c := Config{
		MSSClamp: l.MSSClamp, ICMPRate: l.ICMPRate, ICMPBurst: l.ICMPBurst,
		NeighReachable: l.NeighReachable, NeighProbeBefore: l.NeighProbeBefore,
		NeighRetrans: l.NeighRetrans, NeighProbes: l.NeighProbes,
		GleanSourceRate: l.GleanSourceRate, GleanSourceBurst: l.GleanSourceBurst,
		GleanPortRate: l.GleanPortRate, GleanPortBurst: l.GleanPortBurst,
		Now: e.cfg.Now,
	}
	c.setDefaults()
	e.limits.Store(c.limits())
	return nil
}

// refreshLimits takes the published limits if they changed since the
// last poll.
func (w *Worker) refreshLimits() {
	if l := w.e.limits.Load(); l != w.limSrc {
		w.limSrc, w.lim = l, *l
	}
}
