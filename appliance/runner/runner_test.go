package runner

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/porttest"
	"golang.org/x/sys/unix"
)

var (
	macR0 = net.HardwareAddr{0x02, 0, 0x5e, 0x60, 0, 1}
	macR1 = net.HardwareAddr{0x02, 0, 0x5e, 0x60, 0, 2}
	macA  = net.HardwareAddr{0x02, 0, 0x5e, 0x60, 0, 0xa}
	macB  = net.HardwareAddr{0x02, 0, 0x5e, 0x60, 0, 0xb}
	r0    = netip.MustParsePrefix("198.18.60.254/24")
	r1    = netip.MustParsePrefix("198.18.61.254/24")
	hostA = netip.MustParseAddr("198.18.60.1")
	hostB = netip.MustParseAddr("198.18.61.1")
)

// ip4UDP is an IPv4/UDP packet (UDP checksum 0: none).
func ip4UDP(src, dst netip.Addr, payload int) []byte {
	b := make([]byte, 28+payload)
	b[0], b[8], b[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)))
	s, d := src.As4(), dst.As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(b[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(b[20:], 1000)
	binary.BigEndian.PutUint16(b[22:], 2000)
	binary.BigEndian.PutUint16(b[24:], uint16(8+payload))
	return b
}

// frame is a UDP packet from host A to dst, as it arrives on port 0.
func frame(dst netip.Addr) []byte {
	f := append(append(append([]byte{}, macR0...), macA...), 0x08, 0x00)
	return append(f, ip4UDP(hostA, dst, 18)...)
}

// xskPort gives a test port the descriptor an AF_XDP port has per queue.
type xskPort struct {
	*porttest.Port
	fd int
}

func (p xskPort) FD(int) int { return p.fd }

type rig struct {
	e      *fwd.Engine
	p0, p1 *porttest.Port
	ports  []fwd.Port
}

// newRig is a router between two ports of one queue each; B is resolved.
// With fd >= 0 both ports report fd as their queue's descriptor.
func newRig(t *testing.T, fd int) *rig {
	t.Helper()
	pool := porttest.NewPool(1, 512, 0)
	r := &rig{p0: porttest.New("p0", macR0, 1500, 1, pool), p1: porttest.New("p1", macR1, 1500, 1, pool)}
	r.ports = []fwd.Port{r.p0, r.p1}
	if fd >= 0 {
		r.ports = []fwd.Port{xskPort{r.p0, fd}, xskPort{r.p1, fd}}
	}
	var err error
	if r.e, err = fwd.New(fwd.Config{Mode: fwd.ModeRouter}, r.ports); err != nil {
		t.Fatal(err)
	}
	for i, p := range []netip.Prefix{r0, r1} {
		if err := r.e.AddAddress(i, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.e.SetNeighbour(1, hostB, macB); err != nil {
		t.Fatal(err)
	}
	return r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}

func eventfd(t *testing.T) int {
	t.Helper()
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func TestForwardsAndStops(t *testing.T) {
	for _, busy := range []bool{false, true} {
		r := newRig(t, -1)
		run, err := Start(r.e, r.ports, Options{Busy: busy})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			r.p0.Inject(0, frame(hostB))
			waitFor(t, "forwarded", func() bool { _, tx := r.p1.Counts(0); return tx == uint64(i+1) })
			if !busy {
				time.Sleep(30 * time.Millisecond) // idle long enough to sleep between packets
			}
		}
		if err := run.Stop(5 * time.Second); err != nil {
			t.Fatalf("busy=%v: %v", busy, err)
		}
		if err := run.Stop(time.Second); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
	}
}

// Each worker runs on its own thread, pinned to its CPU, at the nice the
// daemon gives it (when the process may lower its nice).
func TestPinnedAndNiced(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for c := 0; cpu < 0 && c < 1024; c++ {
		if set.IsSet(c) {
			cpu = c
		}
	}
	r := newRig(t, -1)
	run, err := Start(r.e, r.ports, Options{CPUs: []int{cpu}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Stop(0)
	if got := run.CPUs(); len(got) != 1 || got[0] != cpu {
		t.Fatalf("CPUs %v, want [%d]", got, cpu)
	}
	tid := run.TIDs()[0]
	if tid == 0 || tid == unix.Gettid() {
		t.Fatalf("worker thread id %d", tid)
	}
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(cpu) {
		t.Errorf("worker may run on %d CPUs, want only CPU %d", got.Count(), cpu)
	}
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatal(err)
	}
	// The system call returns 20 - nice.
	if nice := 20 - prio; os.Geteuid() == 0 && nice != WorkerNice {
		t.Errorf("worker nice %d, want %d", nice, WorkerNice)
	}

	if _, err := Start(newRig(t, -1).e, nil, Options{CPUs: []int{1 << 20}}); err == nil {
		t.Error("Start pinned a worker to a CPU that does not exist")
	}
}

// The control loop hands events and punted frames on, and ticks.
func TestControlLoop(t *testing.T) {
	r := newRig(t, -1)
	events := make(chan fwd.Event, 16)
	punts := make(chan int, 16)
	ticks := make(chan struct{}, 1)
	run, err := Start(r.e, r.ports, Options{
		Interval: time.Millisecond,
		Event:    func(ev fwd.Event) { events <- ev },
		Punt:     func(port int, _ []byte) { punts <- port },
		Tick: func() {
			select {
			case ticks <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Stop(0)
	<-ticks
	// A packet for the router itself is punted from port 0.
	r.p0.Inject(0, frame(r0.Addr()))
	select {
	case port := <-punts:
		if port != 0 {
			t.Errorf("punt from port %d", port)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no punt within 5 s")
	}
	if run.Punts() != 1 {
		t.Errorf("Punts %d", run.Punts())
	}
	// B sends to A, whom the engine resolves; A's ARP reply is learned
	// and reported.
	fromB := append(append(append([]byte{}, macR1...), macB...), 0x08, 0x00)
	r.p1.Inject(0, append(fromB, ip4UDP(hostB, hostA, 18)...))
	waitFor(t, "ARP request", func() bool { _, tx := r.p0.Counts(0); return tx == 1 })
	arp := append(append(append([]byte{}, macR0...), macA...), 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2)
	a4, r4 := hostA.As4(), r0.Addr().As4()
	arp = append(append(append(append(arp, macA...), a4[:]...), macR0...), r4[:]...)
	r.p0.Inject(0, arp)
	select {
	case ev := <-events:
		if ev.Kind != fwd.EventNeighbourLearned || ev.Addr != hostA || ev.Port != 0 {
			t.Errorf("event %+v, want A learned on port 0", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no neighbour event within 5 s")
	}
}

// A worker the kernel does not let lower its nice (no CAP_SYS_NICE, no
// RLIMIT_NICE for it) still forwards, at the process's nice, and the
// runner says why (the daemon logs it).
func TestNiceRefused(t *testing.T) {
	orig := setNice
	setNice = func(int) error { return unix.EACCES }
	t.Cleanup(func() { setNice = orig })
	before, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, -1)
	run, err := Start(r.e, r.ports, Options{})
	if err != nil {
		t.Fatalf("Start with the nice refused: %v", err)
	}
	defer run.Stop(0)
	if errs := run.NiceErrors(); len(errs) != 1 || errs[0] != unix.EACCES {
		t.Errorf("NiceErrors %v, want [EACCES]", errs)
	}
	if prio, err := unix.Getpriority(unix.PRIO_PROCESS, run.TIDs()[0]); err != nil || prio != before {
		t.Errorf("worker priority %d (%v), want the process's %d", prio, err, before)
	}
	r.p0.Inject(0, frame(hostB))
	waitFor(t, "forwarded", func() bool { _, tx := r.p1.Counts(0); return tx == 1 })
}
