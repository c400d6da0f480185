package daemon

import (
	"fmt"
	"runtime"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/fwd"

	"github.com/ovfwd/ovfwd/config"
	"golang.org/x/sys/unix"
)

// startWorkers starts one worker per queue index, each on its own OS
// thread pinned to its CPU: the configured list, or every CPU this process
// may run on when the list is empty, assigned in order (wrapping when
// there are more queues than CPUs).
func (d *daemon) startWorkers(a config.Appliance) error {
	cpus := a.Workers
	if len(cpus) == 0 {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return fmt.Errorf("daemon: cpu affinity: %w", err)
		}
		for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
			if set.IsSet(c) {
				cpus = append(cpus, c)
			}
		}
	}
	ws := d.engine.Workers()
	if len(a.Workers) > 0 && len(a.Workers) != len(ws) {
		d.log.Warn("worker CPUs and queues differ; CPUs are reused in order", "cpus", len(a.Workers), "queues", len(ws))
	}
	adaptive := a.Poll != config.PollBusy
	if err := d.newHandWakes(); err != nil {
		return err
	}
	d.cpus = make([]int, len(ws))
	d.beats = make([]heartbeat, len(ws))
	for q, w := range ws {
		cpu := -1
		if len(cpus) > 0 {
			cpu = cpus[q%len(cpus)]
		}
		d.cpus[q] = cpu
		pinned := make(chan error, 1)
		d.workers.Add(1)
		go func() {
			defer d.workers.Done()
			// Never unlocked: a pinned thread must not go back to the
			// runtime's pool; it exits with this goroutine.
			runtime.LockOSThread()
			if cpu >= 0 {
				var set unix.CPUSet
				set.Set(cpu)
				if err := unix.SchedSetaffinity(0, &set); err != nil {
					pinned <- err
					return
				}
			}
			// Best effort: the unit's LimitNICE (RLIMIT_NICE) allows it
			// without CAP_SYS_NICE; elsewhere the worker may keep nice 0.
			if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), workerNice); err != nil {
				d.log.Warn("worker priority not raised", "queue", q, "nice", workerNice, "err", err,
					"fix", "LimitNICE=-5 in the unit (as packaged), or CAP_SYS_NICE")
			}
			pinned <- nil
			fds := d.rxFDs(q)
			var wake *injectWake
			if q == 0 && d.wake != nil && len(fds) > 0 {
				wake = d.wake
				fds = append(fds, unix.PollFd{Fd: int32(wake.fd)})
			}
			hw := d.handWakes[q]
			if hw != nil && len(fds) > 0 {
				fds = append(fds, unix.PollFd{Fd: int32(hw.fd)})
			}
			runWorker(w, fds, wake, hw, d.stop, adaptive, &d.beats[q])
		}()
		if err := <-pinned; err != nil {
			return fmt.Errorf("daemon: pinning worker %d to CPU %d: %w", q, cpu, err)
		}
		d.log.Info("worker", "queue", q, "cpu", cpu, "adaptive", adaptive)
	}
	return nil
}

const (
	// workerNice is the worker threads' nice value. CFS shares a CPU
	// between scheduling groups, not threads: the daemon's threads form one
	// group (a session autogroup or a service cgroup) whose weight is split
	// across the CPUs it runs on in proportion to its threads' load there,
	// while a threaded-NAPI or ksoftirqd kernel thread on the worker's CPU
	// has a full nice-0 weight of its own. A nice-0 worker got ~28 % of its
	// CPU next to the NAPI thread feeding it (bench fwd) and the XSK RX ring
	// overflowed; a lower nice raises the worker's load and with it the
	// group's share of that CPU. Measured with bench vpn (adaptive, 4-9
	// runs each, load 4-8): loss at the ring 41 % at nice 0, 21 % at -5,
	// 3 % at -10, with delivered pkt/s 120 k, 120 k, 106 k (-10 also took
	// CPU from the benchmark's clients, which share the daemon's autogroup
	// there). -5 is the conservative choice: a worker far above ksoftirqd
	// starves its own ingress (bench.boostNice).
	workerNice = -5
	// spinPolls is how many empty polls an adaptive worker makes before it
	// sleeps: enough to catch the rest of a burst without a wake-up.
	spinPolls = 256
	// idleWait bounds an adaptive worker's sleep: the engine's timers
	// (neighbour retransmits, held packets, ICMP tokens) advance only when
	// it polls, and shutdown waits for it.
	idleWait = 20 * time.Millisecond
)

// runWorker polls w until stop closes. Busy workers spin. Adaptive ones,
// once idle, sleep in poll(2) on their AF_XDP sockets, so a frame wakes
// them at once and an idle appliance costs next to no CPU (fwd's
// Worker.Run instead naps in ≤ 1 ms steps, about 6 % of a CPU idle here).
// Worker 0 also wakes for injected packets when wake is set (its eventfd
// is then the last of fds). Each pass stores a new heartbeat value (one
// plain store to the worker's own cache line) for the control plane's
// stall check.
func runWorker(w *fwd.Worker, fds []unix.PollFd, wake *injectWake, hw *handWake, stop <-chan struct{}, adaptive bool, beat *heartbeat) {
	idle := 0
	var passes uint64
	for {
		select {
		case <-stop:
			return
		default:
		}
		passes++
		beat.n.Store(passes)
		if w.Poll() > 0 || !adaptive {
			idle = 0
			continue
		}
		idle++
		if idle >= spinPolls && !hw.announce(w) {
			idle = 0 // another worker handed it packets meanwhile
			continue
		}
		switch {
		case idle < spinPolls:
		case wake != nil:
			wake.sleep(w, fds, int(idleWait/time.Millisecond))
		case len(fds) > 0:
			afxdp.WaitRx(fds, int(idleWait/time.Millisecond))
		default:
			time.Sleep(time.Millisecond)
		}
		if idle >= spinPolls {
			hw.woke(w)
		}
	}
}

// rxFDs are the sockets of queue q on every AF_XDP port.
func (d *daemon) rxFDs(q int) []unix.PollFd {
	var fds []unix.PollFd
	for _, pt := range d.ports {
		if pt.xdp != nil && q < pt.fp.Info().Queues {
			fds = append(fds, unix.PollFd{Fd: int32(pt.xdp.FD(q))})
		}
	}
	return fds
}
