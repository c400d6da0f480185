package afxdp

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The kernel's refusals of the optional features a port asks for, injected
// through the seam where the request is made (each restored after the test).

func refuseNativeXDP(t *testing.T) {
	orig := linkXDP
	linkXDP = func(o link.XDPOptions) (link.Link, error) {
		if o.Flags == link.XDPDriverMode {
			return nil, unix.EOPNOTSUPP
		}
		return orig(o)
	}
	t.Cleanup(func() { linkXDP = orig })
}

// refuseBind fails the binds whose flags include flag.
func refuseBind(t *testing.T, flag uint16, errno unix.Errno) {
	orig := bindXSK
	bindXSK = func(fd int, sa unix.Sockaddr) error {
		if x, ok := sa.(*unix.SockaddrXDP); ok && x.Flags&flag != 0 {
			return errno
		}
		return orig(fd, sa)
	}
	t.Cleanup(func() { bindXSK = orig })
}

// refuseFastProgram fails the programs that use fp's next-hop map: the
// steering programs built with the fast path.
func refuseFastProgram(t *testing.T, fp *FastPath) {
	orig := loadProgram
	loadProgram = func(name string, insns asm.Instructions) (*ebpf.Program, error) {
		for _, ins := range insns {
			if m := ins.Map(); m != nil && m.FD() == fp.nh.FD() {
				return nil, fmt.Errorf("afxdp: load program %s: %w", name, unix.E2BIG)
			}
		}
		return orig(name, insns)
	}
	t.Cleanup(func() { loadProgram = orig })
}

// refuseUMEMOver fails UMEM registrations larger than limit as a
// locked-memory limit does.
func refuseUMEMOver(t *testing.T, limit int) {
	orig := umemRegister
	umemRegister = func(fd int, mem []byte, size uint32) error {
		if len(mem) > limit {
			return unix.ENOBUFS
		}
		return orig(fd, mem, size)
	}
	t.Cleanup(func() { umemRegister = orig })
}

func refuseTxBudget(t *testing.T) {
	orig := txBudgetSockopt
	txBudgetSockopt = func(fd, level, opt, v int) error {
		if opt == unix.XDP_MAX_TX_SKB_BUDGET {
			return unix.ENOPROTOOPT
		}
		return orig(fd, level, opt, v)
	}
	t.Cleanup(func() { txBudgetSockopt = orig })
}

func refuseChannels(t *testing.T) {
	orig := channelCount
	channelCount = func(string) (int, error) { return 0, unix.EOPNOTSUPP }
	t.Cleanup(func() { channelCount = orig })
}

// logLines collects a port's log (Options.Logf).
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			return true
		}
	}
	return false
}

// Each refusal: both ports still open, a ping crosses them (the hub
// copies between the ports, so traffic flows through every queue's RX and
// TX), and the queue modes and the log name the fallback and the refusal.
func TestFallbacks(t *testing.T) {
	for _, c := range []struct {
		name   string
		queues int
		refuse func(*testing.T)
		o      Options
		says   string // in every queue's mode (with a Share: of the port that made the UMEM, or joined it with shared-umem-refused)
		logs   string // in the log
		check  func(*testing.T, *Port, *Port)
	}{
		{"native-xdp-refused", 2, refuseNativeXDP, Options{}, "native XDP: operation not supported", "native XDP: operation not supported",
			func(t *testing.T, pa, pb *Port) {
				for _, m := range append(pa.Modes(), pb.Modes()...) {
					if m.Attach != ModeGeneric {
						t.Errorf("%v: want generic XDP", m)
					}
				}
			}},
		{"zero-copy-refused", 2, func(t *testing.T) { refuseBind(t, unix.XDP_ZEROCOPY, unix.EOPNOTSUPP) }, Options{},
			"zero-copy refused by the driver: operation not supported", "zero-copy refused by the driver: operation not supported",
			func(t *testing.T, pa, pb *Port) {
				for _, m := range append(pa.Modes(), pb.Modes()...) {
					if m.ZeroCopy {
						t.Errorf("%v: want copy mode", m)
					}
				}
			}},
		{"need-wakeup-refused", 2, func(t *testing.T) { refuseBind(t, unix.XDP_USE_NEED_WAKEUP, unix.EINVAL) }, Options{},
			"need_wakeup refused: invalid argument", "need_wakeup refused: invalid argument", func(t *testing.T, pa, pb *Port) {
				for _, p := range []*Port{pa, pb} {
					for _, q := range p.queues {
						// Zero-copy too, which veth cannot show.
						if !q.kickAlways || !kicksEveryBatch(true, q.wakeErr) {
							t.Errorf("%s: a queue without need_wakeup does not kick TX after every batch", p.Info().Name)
						}
					}
				}
			}},
		{"shared-umem-refused", 2, func(t *testing.T) { refuseBind(t, unix.XDP_SHARED_UMEM, unix.EINVAL) }, Options{Share: NewShare(7, 2)},
			"own UMEM, pool 2: afxdp: h8b1: shared UMEM: afxdp: queue 0: bind to the shared UMEM: invalid argument",
			"using its own UMEM (pool 2): forwarded frames are copied", func(t *testing.T, pa, pb *Port) {
				if pa.Info().Pool != 7 || pb.Info().Pool != 2 {
					t.Errorf("pools %d, %d: want the Share's 7 for the first port, its own 2 for the second", pa.Info().Pool, pb.Info().Pool)
				}
			}},
		{"memlock", 2, func(t *testing.T) { refuseUMEMOver(t, 2<<20) }, Options{},
			"UMEM 1024 frames, rings 512 (XDP_UMEM_REG of 4096 frames: no buffer space available: the locked-memory limit",
			"UMEM 1024 frames, rings 512 (XDP_UMEM_REG of 4096 frames", nil},
		{"memlock-shared", 2, func(t *testing.T) { refuseUMEMOver(t, 2<<20) }, Options{Share: NewShare(7, 2)},
			"UMEM 1024 frames, rings 256 (XDP_UMEM_REG of 8192 frames: no buffer space available: the locked-memory limit",
			"UMEM 1024 frames, rings 256 (XDP_UMEM_REG of 8192 frames", func(t *testing.T, pa, pb *Port) {
				if pa.Info().Pool != 7 || pb.Info().Pool != 7 {
					t.Errorf("pools %d, %d: want the Share's 7 for both", pa.Info().Pool, pb.Info().Pool)
				}
				for _, q := range pb.queues {
					if q.fill.mask+1 != 256 {
						t.Errorf("the joining port's fill ring has %d slots, want the smaller UMEM's 256", q.fill.mask+1)
					}
				}
			}},
		{"fast-path-program-refused", 2, nil /* needs the FastPath: below */, Options{},
			"no XDP fast path: afxdp: load program ovfwd_steer: argument list too long",
			"no XDP fast path: afxdp: load program ovfwd_steer: argument list too long", func(t *testing.T, pa, pb *Port) {
				for _, p := range []*Port{pa, pb} {
					if p.FastRefused() == nil {
						t.Errorf("%s: FastRefused is nil", p.Info().Name)
					}
				}
			}},
		{"tx-budget-refused", 2, refuseTxBudget, Options{}, "tx budget 32: XDP_MAX_TX_SKB_BUDGET: protocol not available",
			"tx budget 32: XDP_MAX_TX_SKB_BUDGET: protocol not available", func(t *testing.T, pa, pb *Port) {
				for _, m := range append(pa.Modes(), pb.Modes()...) {
					if m.TxBudget != defaultTxBudget || !strings.Contains(m.String(), fmt.Sprintf("tx budget %d", defaultTxBudget)) {
						t.Errorf("%v: want tx budget %d", m, defaultTxBudget)
					}
				}
			}},
		// A device whose driver has no channel count: its one queue.
		{"ethtool-channels-refused", 1, refuseChannels, Options{}, "1 queue: ethtool channels: operation not supported",
			"ethtool channels: operation not supported; using 1 queue", func(t *testing.T, pa, pb *Port) {
				for _, p := range []*Port{pa, pb} {
					if p.Info().Queues != 1 {
						t.Errorf("%s: %d queues, want 1", p.Info().Name, p.Info().Queues)
					}
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := newTopo(t, c.queues)
			var log logLines
			open := func(ifname string, o Options) *Port {
				o.Logf = log.logf
				var p *Port
				if err := tp.app.Do(func() (err error) { p, err = Open(ifname, o); return }); err != nil {
					t.Fatalf("%s: %v", ifname, err)
				}
				t.Cleanup(func() { p.Close() })
				return p
			}
			oa, ob := c.o, c.o
			oa.Pool, oa.Index, ob.Pool, ob.Index = 1, 0, 2, 1
			if c.refuse != nil {
				c.refuse(t)
			} else {
				fp, err := NewFastPath()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { fp.Close() })
				oa.FastPath, ob.FastPath = fp, fp
				refuseFastProgram(t, fp)
			}
			pa, pb := open("h8a1", oa), open("h8b1", ob)
			for _, m := range append(pa.Modes(), pb.Modes()...) {
				t.Log(m)
			}
			if c.says != "" {
				ports := []*Port{pa, pb}
				switch {
				case c.o.Share == nil:
				case c.name == "shared-umem-refused":
					ports = ports[1:]
				default:
					ports = ports[:1]
				}
				for _, p := range ports {
					for _, m := range p.Modes() {
						if !strings.Contains(m.Why, c.says) {
							t.Errorf("%s %v: the mode does not say %q", p.Info().Name, m, c.says)
						}
					}
				}
			}
			if c.logs != "" && !log.has(c.logs) {
				t.Errorf("the log does not say %q:\n%s", c.logs, strings.Join(log.lines, "\n"))
			}
			if c.check != nil {
				c.check(t, pa, pb)
			}
			h := startHub(t, tp.app, pa, pb)
			if out, err := tp.a.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", hostB); err != nil {
				t.Fatalf("ping through the ports: %v\n%s", err, out)
			}
			if h.copied.Load() < 6 {
				t.Errorf("hub copied %d frames, want at least 3 requests and 3 replies", h.copied.Load())
			}
		})
	}
}
