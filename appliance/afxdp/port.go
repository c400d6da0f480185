package afxdp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/ovfwd/ovfwd/fwd"
)

// Options configure Open. The zero value is a sensible default: every
// device queue, zero-copy if the driver has it, native XDP if it has it.
type Options struct {
	Queues     int        // 0: the device's channel count
	Attach     AttachMode // 0: native, then generic
	NoZeroCopy bool       // skip the zero-copy attempt
	VPNPort    uint16     // UDP port of the VPN data channel on this port (0: none)
	Pool       uint16     // fwd.PortInfo.Pool when the port shares no memory: unique per port
	Share      *Share     // share the UMEM of each queue with the other ports of Share (nil: own UMEMs)
	FastPath   *FastPath  // build the steering program with the fast path (off until SetFast) and make the port a redirect target
	Index      uint16     // the port's index in the engine, stamped on received packets as InPort
	Logf       func(format string, args ...any)
}

// QueueMode is what one queue got and why.
type QueueMode struct {
	Queue    int
	ZeroCopy bool
	Attach   AttachMode
	TxBudget int    // frames one copy-mode TX kick sends (32 unless the kernel took XDP_MAX_TX_SKB_BUDGET)
	Why      string // why not zero-copy / not native
}

func (m QueueMode) String() string {
	c := "copy"
	if m.ZeroCopy {
		c = "zero-copy"
	}
	s := fmt.Sprintf("queue %d: %s, %s XDP, tx budget %d", m.Queue, c, m.Attach, m.TxBudget)
	if m.Why != "" {
		s += " (" + m.Why + ")"
	}
	return s
}

// Port is an fwd.Port on one Linux interface. Open it in the namespace the
// interface lives in (the sockets stay there).
type Port struct {
	info   fwd.PortInfo
	ifidx  int
	queues []*queue
	modes  []QueueMode
	steer  *Steering
	fast   *FastPath
}

var _ fwd.Port = (*Port)(nil)

// Open binds one AF_XDP socket per queue of ifname and attaches the
// steering program. Traffic to the interface's own addresses keeps
// reaching the kernel (see Steering). With o.Share, a port whose sockets
// cannot join the shared UMEMs (a copy-mode device after a zero-copy one)
// gets its own, as pool o.Pool, and the log says why.
func Open(ifname string, o Options) (*Port, error) {
	p, err := open(ifname, o)
	if err != nil && o.Share != nil && errors.Is(err, errJoin) {
		if o.Logf != nil {
			o.Logf("afxdp: %s: %v; using its own UMEM (pool %d): forwarded frames are copied", ifname, err, o.Pool)
		}
		joinErr := err
		o.Share = nil
		if p, err = open(ifname, o); err == nil {
			for i := range p.modes {
				p.modes[i].Why = joinWhy(p.modes[i].Why, fmt.Sprintf("own UMEM, pool %d: %v", o.Pool, joinErr))
			}
		}
	}
	return p, err
}

func open(ifname string, o Options) (p *Port, err error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	n := o.Queues
	portWhy := ""
	if n == 0 {
		if n, err = channelCount(ifname); err != nil {
			logf("afxdp: %s: ethtool channels: %v; using 1 queue", ifname, err)
			portWhy = fmt.Sprintf("1 queue: ethtool channels: %v", err)
			n, err = 1, nil
		}
	}
	rc := defaultRings
	p = &Port{
		ifidx: ifi.Index,
		info: fwd.PortInfo{
			Name: ifname, MAC: ifi.HardwareAddr, MTU: ifi.MTU, Queues: n,
			Pool: o.Pool, BufSize: int(rc.FrameSize),
		},
	}
	defer func() {
		if err != nil {
			p.Close()
			p = nil
		}
	}()
	if p.steer, err = newSteering(n, o.VPNPort, o.FastPath); err != nil {
		return
	}
	if o.FastPath != nil {
		if err = o.FastPath.AddDevice(ifi.Index); err != nil {
			return p, fmt.Errorf("afxdp: %s: fast path redirect target: %w", ifname, err)
		}
		p.fast = o.FastPath
	}
	if err = p.RefreshLocal(); err != nil {
		return
	}
	att, err := p.steer.Attach(ifi.Index, o.Attach)
	if err != nil {
		return
	}
	if att.NativeErr != nil {
		portWhy = joinWhy(portWhy, fmt.Sprintf("native XDP: %v", att.NativeErr))
	}
	if e := p.steer.FastRefused(); e != nil {
		portWhy = joinWhy(portWhy, fmt.Sprintf("no XDP fast path: %v", e))
	}
	if o.Share != nil {
		p.info.Pool = o.Share.pool
	}
	for q := 0; q < n; q++ {
		var qu *queue
		var bm bindMode
		var e error
		if o.Share != nil {
			qu, bm, e = o.Share.open(ifi.Index, q, rc, !o.NoZeroCopy)
		} else {
			qu, bm, e = openSocket(ifi.Index, q, rc, !o.NoZeroCopy)
		}
		if e != nil {
			return p, fmt.Errorf("afxdp: %s: %w", ifname, e)
		}
		qu.pool, qu.inPort = p.info.Pool, o.Index
		p.queues = append(p.queues, qu)
		if err = p.steer.Register(q, qu.fd); err != nil {
			return p, fmt.Errorf("afxdp: %s queue %d: register socket: %w", ifname, q, err)
		}
		why := joinWhy(bm.Why, portWhy)
		if qu.txBudgetErr != nil {
			why = joinWhy(why, fmt.Sprintf("tx budget %d: XDP_MAX_TX_SKB_BUDGET: %v", qu.txBudget, qu.txBudgetErr))
		}
		m := QueueMode{Queue: q, ZeroCopy: qu.zeroCopy, Attach: att.Mode, TxBudget: int(qu.txBudget), Why: why}
		p.modes = append(p.modes, m)
		logf("afxdp: %s %s", ifname, m)
	}
	return p, nil
}

func joinWhy(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// RefreshLocal re-reads the interface's addresses into the steering map.
func (p *Port) RefreshLocal() error {
	ifi, err := net.InterfaceByIndex(p.ifidx)
	if err != nil {
		return fmt.Errorf("afxdp: %w", err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return fmt.Errorf("afxdp: %s addresses: %w", ifi.Name, err)
	}
	var local []netip.Addr
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			local = append(local, pfx.Addr())
		}
	}
	return p.steer.SetLocal(local)
}

// SetLocal replaces the addresses the kernel keeps on this port.
func (p *Port) SetLocal(addrs []netip.Addr) error { return p.steer.SetLocal(addrs) }

// SetNAT hands ovfwd what NAT owns on the local IPv4 addresses: ports
// lo..hi (Steering.SetNAT); 0, 0 turns it off.
func (p *Port) SetNAT(lo, hi uint16) error { return p.steer.SetNAT(lo, hi) }

// Modes reports, per queue, zero-copy or copy and native or generic XDP.
func (p *Port) Modes() []QueueMode { return append([]QueueMode(nil), p.modes...) }

// FastRefused is why the port's steering program has no fast path although
// Options.FastPath asked for one (the kernel refused that program; the
// port steers without it); nil otherwise.
func (p *Port) FastRefused() error { return p.steer.FastRefused() }

// ProgramID is the kernel id of the steering program (for checks that it
// is gone after Close: ProgramExists).
func (p *Port) ProgramID() (uint32, error) { return p.steer.ProgramID() }

// QueueRxPackets is how many frames queue q has received.
func (p *Port) QueueRxPackets(q int) uint64 { return p.queues[q].st.rxPackets.Load() }

// Ifindex is the interface's index.
func (p *Port) Ifindex() int { return p.ifidx }

// FD is queue q's socket, for a worker that polls when idle.
func (p *Port) FD(q int) int { return p.queues[q].fd }

func (p *Port) Info() fwd.PortInfo { return p.info }

func (p *Port) Rx(q int, b *fwd.Batch) int { return p.queues[q].receive(b) }

func (p *Port) Tx(q int, b *fwd.Batch) int { return p.queues[q].transmit(b) }

func (p *Port) Free(q int, b *fwd.Batch) { p.queues[q].freeBatch(b) }

func (p *Port) Alloc(q int, b *fwd.Batch, n int) int { return p.queues[q].alloc(b, n) }

// SetFast turns the XDP fast path on or off on this port's ingress;
// puntSYN sends TCP SYNs to the engine (MSS clamping). The port must have
// been opened with Options.FastPath.
func (p *Port) SetFast(on, puntSYN bool) error { return p.steer.SetFast(on, p.info.MAC, puntSYN) }

// SetFastBridge turns the bridge fast path on or off on this port's
// ingress (engine port index, untagged VLAN pvid).
func (p *Port) SetFastBridge(on bool, index int, pvid uint16) error {
	return p.steer.SetFastBridge(on, p.info.MAC, index, pvid)
}

// FastStats reads the port's fast-path counters (ingress side).
func (p *Port) FastStats() ([NumFastStats]uint64, error) { return p.steer.FastStats() }

// Close detaches the program and closes every socket. The workers must
// have stopped.
func (p *Port) Close() error {
	var errs []error
	if p.fast != nil {
		errs = append(errs, p.fast.RemoveDevice(p.ifidx))
		p.fast = nil
	}
	if p.steer != nil {
		errs = append(errs, p.steer.Close())
	}
	for _, qu := range p.queues {
		qu.close()
	}
	p.queues = nil
	return errors.Join(errs...)
}
