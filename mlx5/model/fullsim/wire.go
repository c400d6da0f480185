//go:build linux

package fullsim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A Wire is the modelled port's cable plugged into a Linux interface, so
// the model carries real traffic (driver "mlx5-sim" in a namespace lab):
// frames arriving on the interface are injected into the device, which
// filters and steers them to its RQs like any other wire frame, and frames
// the device transmits are written to the interface.
//
// It is lab plumbing, not the driver's data path, but it keeps the model's
// rules: bounded batches, no allocation per frame after AttachWire, every
// drop counted.
//
// # Threading
//
// One goroutine reads the interface (recvmmsg, up to wireBatch frames,
// then one Device.InjectBatch). The device's transmit sink runs on the
// worker that rang the send doorbell; it copies the frame into a bounded
// ring under a short lock, and a second goroutine drains the ring to the
// interface (sendmmsg, PACKET_QDISC_BYPASS). A full ring drops, so a slow
// interface never stalls a worker. Stats and Close may be called from any
// goroutine.
//
// Frames the interface itself transmits (the kernel's own output on it)
// are not looped back into the device (PACKET_IGNORE_OUTGOING). VLAN tags
// the kernel strips on receive (rx-vlan offload) are not restored: turn
// that offload off on the interface to carry tagged frames.
type Wire struct {
	dev   *Device
	name  string
	file  *os.File // the AF_PACKET socket, registered with Go's poller
	raw   syscall.RawConn
	frame int // largest frame either way: the vport MTU in HW bytes

	// Receive side, owned by the reader goroutine.
	rxMsgs   *mmsgBatch
	rxBufs   [][]byte
	rxFrames [][]byte
	rxN      int
	rxErrno  unix.Errno
	recvFn   func(fd uintptr) bool

	// Transmit ring: sinks produce under mu, the writer consumes; a slot
	// in [head, tail) is only read by the writer, and only reused after
	// the writer advanced head past it.
	mu         sync.Mutex
	ring       [][]byte
	lens       []int
	head, tail uint64 // head: next to send; tail: next free
	closed     bool
	txDropped  uint64 // guarded by mu
	kernelDrop uint64 // guarded by mu: PACKET_STATISTICS resets on read
	wake       chan struct{}

	// Transmit side, owned by the writer goroutine.
	txMsgs  *mmsgBatch
	txFrom  int
	txTo    int
	txSent  int
	txErrno unix.Errno
	sendFn  func(fd uintptr) bool

	// Counters, added once per batch by their goroutine.
	rxFramesN, rxBytes, rxTrunc, rxErrors atomic.Uint64
	txFrames, txBytes, txErrors           atomic.Uint64

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// Ring and batch sizes: a batch is what one recvmmsg/sendmmsg moves (the
// engine's batch); the transmit ring absorbs a few worker polls of bursts.
const (
	wireBatch     = 64
	wireRingSlots = 2048 // power of two
)

// WireStats counts what crossed the wire and what it dropped.
type WireStats struct {
	RxFrames, RxBytes uint64 // read from the interface and injected
	RxTruncated       uint64 // longer than the vport MTU: dropped
	RxErrors          uint64 // recvmmsg errors (e.g. the link went down)
	RxKernelDrops     uint64 // the socket's queue overflowed before we read it
	TxFrames, TxBytes uint64 // sent by the device and written to the interface
	TxDropped         uint64 // the transmit ring was full, the frame too long, or the wire closed
	TxErrors          uint64 // frames the interface refused (link down, too big)
}

// AttachWire plugs dev's cable into the interface ifname of the calling
// thread's network namespace (call it inside netns.NS.Do for a namespace);
// the socket stays in that namespace afterwards. The device's port must be
// open: every transmit queue's sink is set to the wire (replacing Connect
// or an earlier sink).
//
// Shut down in this order: stop the workers, Close the wire, close the
// port. Frames the device sends after Close are dropped and counted.
func AttachWire(dev *Device, ifname string) (*Wire, error) {
	dev.mu.Lock()
	queues := len(dev.sqns)
	dev.mu.Unlock()
	if queues == 0 {
		return nil, errors.New("fullsim: AttachWire before the port was opened")
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("fullsim: wire %s: %w", ifname, err)
	}
	file, err := openPacketSocket(ifi.Index)
	if err != nil {
		return nil, fmt.Errorf("fullsim: wire %s: %w", ifname, err)
	}
	w, err := plugWire(dev, ifname, file, queues)
	if err != nil {
		file.Close()
		return nil, fmt.Errorf("fullsim: wire %s: %w", ifname, err)
	}
	return w, nil
}

// plugWire starts a wire over an open, non-blocking datagram socket (an
// AF_PACKET socket, or in tests a socketpair) and sets the sinks of the
// device's queues to it.
func plugWire(dev *Device, name string, file *os.File, queues int) (*Wire, error) {
	raw, err := file.SyscallConn()
	if err != nil {
		return nil, err
	}
	// Frames are bounded by the vport MTU the driver set (HW bytes: the
	// whole frame); the model would drop anything longer anyway.
	frame, _, _, _, _ := dev.model.Vport()
	if frame <= 0 {
		frame = dev.cfg.Sim.MaxMTU
	}
	w := &Wire{dev: dev, name: name, file: file, raw: raw, frame: frame,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.rxMsgs = newMmsgBatch(wireBatch)
	w.rxBufs = carve(wireBatch, w.frame)
	w.rxFrames = make([][]byte, 0, wireBatch)
	for i, b := range w.rxBufs {
		w.rxMsgs.point(i, b)
	}
	w.txMsgs = newMmsgBatch(wireBatch)
	w.ring = carve(wireRingSlots, w.frame)
	w.lens = make([]int, wireRingSlots)
	w.recvFn = w.recvOnce
	w.sendFn = w.sendOnce
	w.wg.Add(2)
	go w.receive()
	go w.transmitLoop()
	sink := w.transmit
	for q := 0; q < queues; q++ {
		dev.SetSink(q, sink)
	}
	return w, nil
}

// openPacketSocket opens a non-blocking AF_PACKET socket bound to ifindex
// that sees every protocol, skips the kernel's own output on the interface
// and sends around the qdisc, wrapped for Go's poller.
func openPacketSocket(ifindex int) (*os.File, error) {
	// Protocol 0 until bound: an ETH_P_ALL socket would see every
	// interface's frames between socket() and bind().
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	opts := []struct {
		level, name, value int
		what               string
	}{
		{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING"},
		{unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS"},
		// Room for bursts while the reader is descheduled on a busy machine.
		{unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8 << 20, "SO_RCVBUFFORCE"},
		{unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4 << 20, "SO_SNDBUFFORCE"},
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.name, o.value); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: %w", o.what, err)
		}
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind: %w", err)
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("packet:%d", ifindex)), nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// carve cuts n buffers of size bytes from one allocation.
func carve(n, size int) [][]byte {
	mem := make([]byte, n*size)
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = mem[i*size : (i+1)*size : (i+1)*size]
	}
	return bufs
}

// receive injects what arrives on the interface, a batch at a time, until
// the socket is closed.
func (w *Wire) receive() {
	defer w.wg.Done()
	for {
		if err := w.raw.Read(w.recvFn); err != nil {
			return // closed
		}
		if w.rxErrno != 0 {
			w.rxErrors.Add(1)
			continue
		}
		frames := w.rxFrames[:0]
		var bytes uint64
		for i := 0; i < w.rxN; i++ {
			m := &w.rxMsgs.hdrs[i]
			if m.Hdr.Flags&unix.MSG_TRUNC != 0 {
				w.rxTrunc.Add(1)
				continue
			}
			frames = append(frames, w.rxBufs[i][:m.Len])
			bytes += uint64(m.Len)
		}
		if len(frames) > 0 {
			w.dev.InjectBatch(frames)
		}
		clear(frames) // the buffers are reused; hold no references
		w.rxFramesN.Add(uint64(len(frames)))
		w.rxBytes.Add(bytes)
	}
}

// recvOnce is the poller callback: false asks it to wait for readability.
func (w *Wire) recvOnce(fd uintptr) bool {
	w.rxN, w.rxErrno = w.rxMsgs.recv(fd)
	return w.rxErrno != unix.EAGAIN && w.rxErrno != unix.EINTR
}

// transmit is the device's sink: it copies f into the ring (f is valid only
// during the call) and wakes the writer when the ring was empty. The
// writer re-checks the ring under the lock after every batch, so a frame
// added while it sends is never stranded.
func (w *Wire) transmit(f []byte) {
	w.mu.Lock()
	if w.closed || w.tail-w.head == wireRingSlots || len(f) > w.frame {
		w.txDropped++
		w.mu.Unlock()
		return
	}
	wasEmpty := w.tail == w.head
	s := w.tail & (wireRingSlots - 1)
	w.lens[s] = copy(w.ring[s], f)
	w.tail++
	w.mu.Unlock()
	if wasEmpty {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// transmitLoop writes the ring to the interface until Close.
func (w *Wire) transmitLoop() {
	defer w.wg.Done()
	for {
		select {
		case <-w.done:
			return
		case <-w.wake:
		}
		for {
			w.mu.Lock()
			head, n := w.head, int(min(w.tail-w.head, wireBatch))
			w.mu.Unlock()
			if n == 0 {
				break
			}
			for i := 0; i < n; i++ {
				s := (head + uint64(i)) & (wireRingSlots - 1)
				w.txMsgs.point(i, w.ring[s][:w.lens[s]])
			}
			sent, failed, ok := w.sendBatch(n)
			w.txFrames.Add(uint64(sent))
			w.txErrors.Add(uint64(failed))
			w.mu.Lock()
			w.head += uint64(sent + failed)
			w.mu.Unlock()
			if !ok {
				return // closed
			}
		}
	}
}

// sendBatch sends messages [0, n): what the kernel took, and what it
// refused (each refused frame is skipped so one bad frame cannot wedge the
// wire). ok is false once the socket is closed.
func (w *Wire) sendBatch(n int) (sent, failed int, ok bool) {
	for sent+failed < n {
		w.txFrom, w.txTo = sent+failed, n
		if err := w.raw.Write(w.sendFn); err != nil {
			return sent, failed, false
		}
		if w.txErrno != 0 || w.txSent == 0 {
			failed++
			continue
		}
		var bytes uint64
		for i := w.txFrom; i < w.txFrom+w.txSent; i++ {
			bytes += w.txMsgs.iovs[i].Len
		}
		w.txBytes.Add(bytes)
		sent += w.txSent
	}
	return sent, failed, true
}

// sendOnce is the poller callback: false asks it to wait for writability.
func (w *Wire) sendOnce(fd uintptr) bool {
	w.txSent, w.txErrno = w.txMsgs.send(fd, w.txFrom, w.txTo)
	return w.txErrno != unix.EAGAIN && w.txErrno != unix.EINTR
}

// Stats returns the wire's counters.
func (w *Wire) Stats() WireStats {
	w.pollKernelDrops()
	w.mu.Lock()
	defer w.mu.Unlock()
	return WireStats{
		RxFrames: w.rxFramesN.Load(), RxBytes: w.rxBytes.Load(), RxTruncated: w.rxTrunc.Load(),
		RxErrors: w.rxErrors.Load(), RxKernelDrops: w.kernelDrop,
		TxFrames: w.txFrames.Load(), TxBytes: w.txBytes.Load(), TxDropped: w.txDropped, TxErrors: w.txErrors.Load(),
	}
}

// pollKernelDrops adds the socket's drop count since the last poll
// (the kernel resets it on every read).
func (w *Wire) pollKernelDrops() {
	var st *unix.TpacketStats
	_ = w.raw.Control(func(fd uintptr) {
		st, _ = unix.GetsockoptTpacketStats(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
	})
	if st != nil {
		w.mu.Lock()
		w.kernelDrop += uint64(st.Drops)
		w.mu.Unlock()
	}
}

// Name is the interface the wire is plugged into.
func (w *Wire) Name() string { return w.name }

// Close unplugs the wire: the device's sinks drop from now on, both
// goroutines stop and the socket is closed. Safe to call twice.
func (w *Wire) Close() error {
	w.closeOnce.Do(func() {
		w.pollKernelDrops()
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.done)
		w.closeErr = w.file.Close() // wakes a reader or writer waiting in the poller
		w.wg.Wait()
	})
	return w.closeErr
}
