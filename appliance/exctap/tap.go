package exctap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Injector sends a frame out of a port of the data plane without blocking
// (fwd.Engine is one).
type Injector interface {
	Inject(port int, frame []byte) error
}

// QueueLen bounds the frames waiting to be written to a TAP.
const QueueLen = 256

// maxTagLen is room for one 802.1Q tag on top of the MTU.
const maxTagLen = 4

// Name is the conventional TAP name for engine port i.
func Name(port int) string { return fmt.Sprintf("ovx-%d", port) }

// Stats counts a TAP's traffic. ToHost*: frames the engine punted for the
// host; FromHost*: frames the host sent out through the port.
type Stats struct {
	ToHost, ToHostQueueFull, ToHostErrors       uint64
	FromHost, FromHostRefused, FromHostTooLarge uint64
}

// TAP is one port's exception device.
type TAP struct {
	name string
	mtu  int
	f    *os.File

	queue chan []byte // frames for the host, in buffers from free
	free  chan []byte
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once

	toHost, toHostFull, toHostErr               atomic.Uint64
	fromHost, fromHostRefused, fromHostTooLarge atomic.Uint64
}

// New creates the TAP device name in the calling thread's network
// namespace with the port's MAC and MTU and brings it up; addresses are
// the caller's to configure. Frames queue for the host from now on (see
// Deliver); Start moves them.
func New(name string, mac net.HardwareAddr, mtu int) (*TAP, error) {
	if len(mac) != 6 || mtu < 68 {
		return nil, fmt.Errorf("exctap: %s: bad MAC %v or MTU %d", name, mac, mtu)
	}
	f, err := openTAP(name, mac, mtu)
	if err != nil {
		return nil, err
	}
	t := &TAP{name: name, mtu: mtu, f: f, queue: make(chan []byte, QueueLen),
		free: make(chan []byte, QueueLen), stop: make(chan struct{})}
	for range QueueLen {
		t.free <- make([]byte, t.frameMax())
	}
	return t, nil
}

// frameMax is the largest frame the port carries: Ethernet header, one
// VLAN tag, MTU.
func (t *TAP) frameMax() int { return 14 + maxTagLen + t.mtu }

// Name is the device's name.
func (t *TAP) Name() string { return t.name }

// Start moves frames between the device and port of inj until Close.
func (t *TAP) Start(inj Injector, port int) {
	t.wg.Add(2)
	go func() { defer t.wg.Done(); t.writeLoop() }()
	go func() { defer t.wg.Done(); t.readLoop(inj, port) }()
}

// Deliver copies frame into the queue for the host. It never blocks: when
// the queue is full (or the TAP closed) the frame is dropped and counted.
// It returns whether the frame was queued.
func (t *TAP) Deliver(frame []byte) bool {
	var b []byte
	select {
	case <-t.stop: // closed: no writer will take it
	default:
		select {
		case b = <-t.free:
		default:
		}
	}
	if b == nil || len(frame) > cap(b) {
		if b != nil {
			t.free <- b
		}
		t.toHostFull.Add(1)
		return false
	}
	t.queue <- append(b[:0], frame...) // cannot block: a buffer was free
	return true
}

func (t *TAP) writeLoop() {
	for {
		select {
		case <-t.stop:
			return
		case b := <-t.queue:
			if _, err := t.f.Write(b); err != nil {
				if errors.Is(err, os.ErrClosed) {
					return
				}
				t.toHostErr.Add(1) // e.g. the device is down
			} else {
				t.toHost.Add(1)
			}
			t.free <- b
		}
	}
}

func (t *TAP) readLoop(inj Injector, port int) {
	buf := make([]byte, t.frameMax()+1) // one spare byte tells a too-large frame
	for {
		n, err := t.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			select {
			case <-t.stop:
				return
			default:
			}
			// A transient error (e.g. EIO while the link is down); do
			// not spin on one that persists (the namespace going away).
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if n > t.frameMax() {
			t.fromHostTooLarge.Add(1)
			continue
		}
		if err := inj.Inject(port, buf[:n]); err != nil {
			t.fromHostRefused.Add(1)
			continue
		}
		t.fromHost.Add(1)
	}
}

// Stats reports the TAP's counters.
func (t *TAP) Stats() Stats {
	return Stats{
		ToHost: t.toHost.Load(), ToHostQueueFull: t.toHostFull.Load(), ToHostErrors: t.toHostErr.Load(),
		FromHost: t.fromHost.Load(), FromHostRefused: t.fromHostRefused.Load(), FromHostTooLarge: t.fromHostTooLarge.Load(),
	}
}

// Close stops the goroutines and removes the device.
func (t *TAP) Close() error {
	var err error
	t.once.Do(func() {
		close(t.stop)
		err = t.f.Close()
		t.wg.Wait()
	})
	return err
}

// Ports maps engine ports to their TAPs (nil: the port has none); its
// Deliver is the function to hand Engine.Punts.
type Ports []*TAP

// Deliver queues a punted frame on port's TAP; frames of ports without a
// TAP are dropped (the caller counts Engine punts).
func (p Ports) Deliver(port int, frame []byte) {
	if port >= 0 && port < len(p) && p[port] != nil {
		p[port].Deliver(frame)
	}
}
