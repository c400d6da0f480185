package runner

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"golang.org/x/sys/unix"
)

// WorkerNice is the workers' nice value. CFS shares a CPU between
// scheduling groups, not threads: a process's threads form one group (a
// session autogroup or a service cgroup) whose weight is split across the
// CPUs it runs on in proportion to its threads' load there, while a
// threaded-NAPI or ksoftirqd kernel thread on the worker's CPU has a full
// nice-0 weight of its own. At nice 0 the worker got too small a share of
// its CPU next to the NAPI thread feeding it and the AF_XDP RX ring
// overflowed; a lower nice raises the worker's load and with it the
// group's share of that CPU. Far below ksoftirqd the worker starves its
// own ingress; -5 is the conservative choice (docs/benchmarks.md has the
// measurements).
const WorkerNice = -5

const (
	// spinPolls is how many empty polls an adaptive worker makes before it
	// sleeps: enough to catch the rest of a burst without a wake-up.
	spinPolls = 256
	// defaultInterval is the control loop's period unless Options says.
	defaultInterval = 50 * time.Millisecond
)

// idleWait bounds an adaptive worker's sleep (a variable so that a test
// can show the inject wake-up does not wait for it).
var idleWait = 20 * time.Millisecond

// Options says how to run an engine. The zero value is the daemon's
// default: adaptive workers at WorkerNice on every CPU the process may
// use, a 50 ms control loop, events and punts dropped.
type Options struct {
	// CPUs are the workers' CPUs: worker q runs on CPUs[q%len(CPUs)]. Empty
	// means every CPU the process may run on, in order.
	CPUs []int
	// Nice is the workers' nice value; 0 means WorkerNice. Best effort:
	// without CAP_SYS_NICE a worker keeps the process's.
	Nice int
	// Busy workers never sleep (config poll = "busy").
	Busy bool
	// Wake, when set, wakes worker 0 from its idle sleep as soon as a
	// packet is injected through it.
	Wake *Wake

	// Interval is the control loop's period; 0 means 50 ms.
	Interval time.Duration
	// Event receives each neighbour event of a control pass (nil: dropped).
	Event func(fwd.Event)
	// Punt receives each frame the workers handed to the control plane
	// (nil: dropped, still counted by Punts).
	Punt func(port int, frame []byte)
	// Tick, when set, ends every control pass (the VPN's timers).
	Tick func()
	// Beat, when set, gives worker q a counter it stores its pass count
	// into after every poll (one plain store to a line the caller keeps
	// apart), for a stall check.
	Beat func(q int) *atomic.Uint64
}

// Runner is a running engine: its workers and its control loop.
type Runner struct {
	e        *fwd.Engine
	stop     chan struct{}
	workers  sync.WaitGroup
	control  sync.WaitGroup
	cpus     []int
	tids     []int
	niceErrs []error
	hands    []*handWake
	punts    atomic.Uint64
	stopOnce sync.Once
	doneOnce sync.Once // closes the hand wakes once the loops are gone
}

// Start starts one worker per queue index of e and the control loop.
// ports are the ports e was built from, in the same order: those with a
// descriptor per queue (an FD(q int) int method, as AF_XDP ports have) are
// what an idle worker sleeps on. When a worker cannot be pinned, Start
// stops the ones it started and fails.
func Start(e *fwd.Engine, ports []fwd.Port, o Options) (*Runner, error) {
	cpus := o.CPUs
	if len(cpus) == 0 {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return nil, fmt.Errorf("runner: cpu affinity: %w", err)
		}
		for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
	}
	nice := o.Nice
	if nice == 0 {
		nice = WorkerNice
	}
	ws := e.Workers()
	r := &Runner{e: e, stop: make(chan struct{}), cpus: make([]int, len(ws)), tids: make([]int, len(ws)), niceErrs: make([]error, len(ws))}
	var err error
	if r.hands, err = newHandWakes(e); err != nil {
		return nil, fmt.Errorf("runner: eventfd: %w", err)
	}
	for q, w := range ws {
		cpu := -1
		if len(cpus) > 0 {
			cpu = cpus[q%len(cpus)]
		}
		r.cpus[q] = cpu
		k := &worker{w: w, fds: rxFDs(ports, q), busy: o.Busy}
		if o.Beat != nil {
			k.beat = o.Beat(q)
		}
		if q == 0 && o.Wake != nil && len(k.fds) > 0 {
			k.wake = o.Wake
			k.fds = append(k.fds, unix.PollFd{Fd: int32(o.Wake.fd)})
		}
		if hw := r.hands[q]; hw != nil && len(k.fds) > 0 {
			k.hand = hw
			k.fds = append(k.fds, unix.PollFd{Fd: int32(hw.fd)})
		}
		started := make(chan error, 1)
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			// Never unlocked: a pinned thread must not go back to the
			// runtime's pool; it exits with this goroutine.
			runtime.LockOSThread()
			if cpu >= 0 {
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					started <- err
					return
				}
			}
			r.niceErrs[q] = setNice(nice)
			r.tids[q] = unix.Gettid()
			started <- nil
			k.run(r.stop)
		}()
		if err := <-started; err != nil {
			r.Stop(0)
			return nil, fmt.Errorf("runner: pinning worker %d to CPU %d: %w", q, cpu, err)
		}
	}
	interval := o.Interval
	if interval <= 0 {
		interval = defaultInterval
	}
	r.control.Add(1)
	go r.controlLoop(interval, o)
	return r, nil
}

// CPUs is each worker's CPU, by queue index (-1: not pinned).
func (r *Runner) CPUs() []int { return r.cpus }

// TIDs is each worker's thread id, by queue index (for CPU accounting).
func (r *Runner) TIDs() []int { return r.tids }

// setNice sets the calling thread's nice; tests replace it to inject the
// kernel's refusal (EACCES without CAP_SYS_NICE and with an RLIMIT_NICE
// that does not allow it, kernel/sys.c set_one_prio, can_nice).
var setNice = func(nice int) error { return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice) }

// NiceErrors is, by queue index, why a worker could not take its nice
// (nil when it did): without CAP_SYS_NICE or a RLIMIT_NICE that allows it,
// a worker keeps the process's.
func (r *Runner) NiceErrors() []error { return r.niceErrs }

// Punts is how many frames the control loop took from the workers.
func (r *Runner) Punts() uint64 { return r.punts.Load() }

// ErrStuck is Stop's error when a worker or the control loop did not stop
// within the budget.
var ErrStuck = errors.New("runner: workers did not stop in time")

// Stop stops the workers and the control loop and waits for them, at most
// budget (0: without bound). After ErrStuck a worker may still own its
// queues: the caller must not close them under it.
func (r *Runner) Stop(budget time.Duration) error {
	r.stopOnce.Do(func() { close(r.stop) })
	done := make(chan struct{})
	go func() {
		r.workers.Wait()
		r.control.Wait()
		r.doneOnce.Do(func() { closeHandWakes(r.hands) })
		close(done)
	}()
	if budget <= 0 {
		<-done
		return nil
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return ErrStuck
	}
}

// controlLoop is the engine's periodic control-plane step.
func (r *Runner) controlLoop(interval time.Duration, o Options) {
	defer r.control.Done()
	tk := time.NewTicker(interval)
	defer tk.Stop()
	punt := o.Punt
	if punt == nil {
		punt = func(int, []byte) {}
	}
	var evs []fwd.Event
	for {
		select {
		case <-r.stop:
			return
		case <-tk.C:
		}
		r.e.Service()
		evs = r.e.Events(evs[:0])
		if o.Event != nil {
			for _, ev := range evs {
				o.Event(ev)
			}
		}
		r.punts.Add(uint64(r.e.Punts(punt)))
		if o.Tick != nil {
			o.Tick()
		}
	}
}

// fdPort is a port whose queues have a descriptor poll(2) reports
// readable when a frame arrives (an AF_XDP socket).
type fdPort interface {
	FD(q int) int
}

// rxFDs are the descriptors of queue q on every port that has them.
func rxFDs(ports []fwd.Port, q int) []unix.PollFd {
	var fds []unix.PollFd
	for _, p := range ports {
		if fp, ok := p.(fdPort); ok && q < p.Info().Queues {
			fds = append(fds, unix.PollFd{Fd: int32(fp.FD(q))})
		}
	}
	return fds
}
