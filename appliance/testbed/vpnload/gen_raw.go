package vpnload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/control"
)

// The raw generator puts the clients' data packets on the client link
// itself: each thread owns a packet socket on lc0 (PACKET_QDISC_BYPASS)
// and a disjoint subset of the clients, and sends batches of complete
// Ethernet+IPv4+UDP frames with one sendmmsg each. A frame is addressed
// exactly as the client's connected UDP socket would address it (same
// source address and port, so the server sees the same peer and nothing
// floats) and carries a P_DATA_V2 packet with a fresh packet id of the
// client's current key.
//
// Sealing: before an unpaced window, preseal fills a memory budget with
// frames sealed in the order they will be sent, so the window spends its
// time sending; once they run out (and in paced runs) each batch is
// sealed on the fly into rawBatch reused frames. Sealing ahead takes the
// AEAD out of the generator's per-packet time, so at 64 B the generator
// offers more (docs/benchmarks.md); at 1400 B it made no measurable
// difference.
//
// Keys: sealing on the fly reads the client's current data key every
// rawRun packets (control.Client.SealNext), so a renegotiation costs at
// most the packets in flight on the old key, which the server still
// accepts as the lame duck. Frames sealed ahead keep the key they were
// sealed with; after a renegotiation they count as loss once the server
// retires that key (the bench's servers never renegotiate: reneg-sec 0).
//
// Refusals: sendmmsg stops at a frame the link refuses (the veth's peer
// queue is full); the frame is tried once more, and if refused again it
// counts as offered and refused (server-side loss).

// Frame layout.
const (
	ethHdrLen   = 14
	ipv4HdrLen  = 20
	udpHdrLen   = 8
	frameHdrLen = ethHdrLen + ipv4HdrLen + udpHdrLen
)

const (
	rawBatch = 64 // frames per sendmmsg
	rawRun   = 8  // consecutive packets of one client in a batch
)

// rawFlow is one client's frame header and inner packet.
type rawFlow struct {
	c     *control.Client
	hdr   [frameHdrLen]byte
	inner []byte
}

// rawWorker is one generator thread: its packet socket, its clients and
// its reusable frames.
type rawWorker struct {
	fd     int
	flows  []rawFlow
	frames [][]byte // rawBatch frames of frameLen bytes
	sealed [][]byte // frames[i][frameHdrLen:], where SealNext writes
	out    [][]byte // the frames of one sendmmsg
	mm     *control.Mmsg
	next   int // flow that starts the next batch

	// pre holds preN frames sealed before the measured window, frameLen
	// apart, sent first (prePos is the next one); then sealing goes on
	// on the fly.
	pre      []byte // frames sealed ahead
	preN     int
	prePos   int
	frameLen int

	sent, refused, failed uint64
	err                   error
}

// rawGen is the raw generator of one run.
type rawGen struct {
	workers []*rawWorker
}

// newRawGen builds a raw generator over the connected clients, with
// threads sockets (one per thread) on lc0 in t.cli.
func newRawGen(t *topology, clients []*control.Client, payload, threads int) (*rawGen, error) {
	dstMAC, err := serverMAC(t)
	if err != nil {
		return nil, err
	}
	out, err := t.cli.Run("cat", "/sys/class/net/lc0/address")
	if err != nil {
		return nil, err
	}
	srcMAC, err := net.ParseMAC(strings.TrimSpace(out))
	if err != nil {
		return nil, fmt.Errorf("vpnload: lc0 address: %v", err)
	}
	var flows []rawFlow
	dst := netip.MustParseAddr(sinkDst)
	for i, c := range clients {
		if c == nil || c.Pushed() == nil {
			continue
		}
		inner := udpPacket(c.Pushed().IPv4.Addr(), dst, uint16(10000+i), 9, payload)
		flows = append(flows, rawFlow{
			c:     c,
			hdr:   frameHeader(dstMAC, srcMAC, c.LocalAddr(), c.RemoteAddr(), vpn.DataHeaderLen+len(inner)),
			inner: inner,
		})
	}
	if len(flows) == 0 {
		return nil, errors.New("vpnload: no connected client")
	}
	threads = max(1, min(threads, len(flows)))
	g := &rawGen{}
	frameLen := frameHdrLen + vpn.DataHeaderLen + len(flows[0].inner)
	for w := range threads {
		rw := &rawWorker{fd: -1, mm: control.NewMmsg(rawBatch), out: make([][]byte, rawBatch), frameLen: frameLen}
		g.workers = append(g.workers, rw)
		for i := w; i < len(flows); i += threads {
			rw.flows = append(rw.flows, flows[i])
		}
		rw.frames = make([][]byte, rawBatch)
		rw.sealed = make([][]byte, rawBatch)
		for i := range rw.frames {
			// TagLen of scratch past the frame: Seal builds the tag there.
			b := make([]byte, frameLen+vpn.TagLen)
			rw.frames[i] = b[:frameLen]
			rw.sealed[i] = b[frameHdrLen:frameHdrLen]
		}
		// The socket must be made in the clients' namespace, where lc0 is.
		if err := t.cli.Do(func() (err error) {
			rw.fd, err = openPacketSocket("lc0")
			return err
		}); err != nil {
			g.close()
			return nil, err
		}
	}
	return g, nil
}

// openPacketSocket opens a transmit-only packet socket on ifname (in the
// calling thread's namespace): protocol 0 receives nothing, and
// PACKET_QDISC_BYPASS hands frames straight to the driver, as pktgen-like
// generators do.
func openPacketSocket(ifname string) (int, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return -1, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("vpnload: packet socket: %w", err)
	}
	steps := []func() error{
		func() error { return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1) },
		func() error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20) },
		func() error { return unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("vpnload: packet socket on %s: %w", ifname, err)
		}
	}
	return fd, nil
}

func (g *rawGen) close() {
	for _, w := range g.workers {
		if w.fd >= 0 {
			unix.Close(w.fd)
			w.fd = -1
		}
		w.pre, w.preN = nil, 0
	}
}

// preseal seals up to budget bytes of frames per worker ahead of the
// measured window, in the order they will be sent, so that the window
// spends no time sealing while they last. Their packet ids are taken
// now; ids a short run leaves unsent are skipped, which the server's
// replay window allows.
func (g *rawGen) preseal(budget int) {
	for _, w := range g.workers {
		w.pre, w.preN, w.prePos = nil, 0, 0
		n := budget / len(g.workers) / w.frameLen / rawBatch * rawBatch
		if n == 0 {
			continue
		}
		// TagLen of scratch past the last frame: Seal builds the tag there.
		w.pre = make([]byte, n*w.frameLen+vpn.TagLen)
		dst := make([][]byte, rawRun)
		for i, tries := 0, 0; i < n && tries < 2*n; tries++ {
			f := &w.flows[w.next]
			w.next = (w.next + 1) % len(w.flows)
			run := min(rawRun, n-i)
			for j := range run {
				off := (i+j)*w.frameLen + frameHdrLen
				dst[j] = w.pre[off:off]
			}
			if f.c.SealNext(dst[:run], f.inner) != nil {
				continue
			}
			for j := range run {
				copy(w.pre[(i+j)*w.frameLen:], f.hdr[:])
			}
			i += run
			w.preN = i
		}
	}
}

// offer runs every worker for d, each client at most perClientPPS (0: as
// fast as the thread can), and returns the frames the kernel took, the
// frames it refused (the link to the server was full: the server's loss)
// and the packets not sealed because a client was not connected.
func (g *rawGen) offer(perClientPPS int, d time.Duration) (sent, refused, failed uint64, err error) {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, w := range g.workers {
		w.sent, w.refused, w.failed, w.err = 0, 0, 0, nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			w.run(perClientPPS, deadline)
		}()
	}
	wg.Wait()
	for _, w := range g.workers {
		sent += w.sent
		refused += w.refused
		failed += w.failed
		if err == nil {
			err = w.err
		}
	}
	return sent, refused, failed, err
}

// run sends batches until deadline.
func (w *rawWorker) run(perClientPPS int, deadline time.Time) {
	var interval time.Duration
	batch := rawBatch
	if perClientPPS > 0 {
		rate := perClientPPS * len(w.flows)
		batch = max(1, min(rawBatch, rate/100)) // about 100 batches per second
		interval = time.Second * time.Duration(batch) / time.Duration(rate)
	}
	next := time.Now()
	for {
		now := time.Now()
		if !now.Before(deadline) {
			return
		}
		if interval > 0 {
			next = next.Add(interval)
			if wait := next.Sub(now); wait > 0 {
				time.Sleep(wait)
			}
		}
		if !w.sendBatch(batch) {
			return
		}
	}
}

// sendBatch seals n packets (rawRun per client in turn) into the frames
// and sends them. It reports false after an unexpected socket error.
func (w *rawWorker) sendBatch(n int) bool {
	if w.prePos < w.preN {
		if w.prePos%(256*rawBatch) < n {
			// Now and then: the clients' own keepalives would carry ids
			// newer than the sealed frames still to be sent.
			for i := range w.flows {
				w.flows[i].c.NoteSending()
			}
		}
		k := min(n, w.preN-w.prePos)
		for j := range k {
			off := (w.prePos + j) * w.frameLen
			w.out[j] = w.pre[off : off+w.frameLen]
		}
		w.prePos += k
		return w.send(w.out[:k])
	}
	k := 0
	for tries := 0; k < n && tries < 2*rawBatch; tries++ {
		f := &w.flows[w.next]
		w.next++
		if w.next == len(w.flows) {
			w.next = 0
		}
		run := min(rawRun, n-k)
		if f.c.SealNext(w.sealed[k:k+run], f.inner) != nil {
			w.failed += uint64(run)
			continue
		}
		for j := k; j < k+run; j++ {
			copy(w.frames[j], f.hdr[:])
		}
		k += run
	}
	return w.send(w.frames[:k])
}

// send puts frames on the wire, counting the ones the link refuses.
func (w *rawWorker) send(frames [][]byte) bool {
	for off := 0; off < len(frames); {
		m, err := w.mm.SendFD(uintptr(w.fd), frames[off:])
		if err != 0 {
			m = 0
		}
		w.sent += uint64(m)
		off += m
		switch {
		case err == 0 && m > 0:
		case err == 0 || err == unix.ENOBUFS || err == unix.EAGAIN:
			// The veth refused the frame at off (its peer's queue is
			// full): the server did not keep up. Count it and go on.
			w.refused++
			off++
		default:
			w.err = fmt.Errorf("vpnload: sendmmsg: %w", err)
			return false
		}
	}
	return true
}

// frameHeader is the Ethernet, IPv4 and UDP header of a datagram of
// udpPayload bytes from src to dst (DF, TTL 64, UDP checksum 0: none,
// allowed for IPv4), as the client's socket would send it.
func frameHeader(dstMAC, srcMAC net.HardwareAddr, src, dst netip.AddrPort, udpPayload int) [frameHdrLen]byte {
	var h [frameHdrLen]byte
	copy(h[0:6], dstMAC)
	copy(h[6:12], srcMAC)
	binary.BigEndian.PutUint16(h[12:], 0x0800)
	ip := h[ethHdrLen:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(ipv4HdrLen+udpHdrLen+udpPayload))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	binary.BigEndian.PutUint16(ip[10:], ^netns.Checksum(ip[:ipv4HdrLen]))
	udp := ip[ipv4HdrLen:]
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpHdrLen+udpPayload))
	return h
}

// serverMAC is the link address the client namespace resolved for the
// server (the handshake resolved it), else the server-side veth's own.
func serverMAC(t *topology) (net.HardwareAddr, error) {
	if out, err := t.cli.Run("ip", "neigh", "show", serverIP0, "dev", "lc0"); err == nil {
		f := strings.Fields(out)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "lladdr" {
				if mac, err := net.ParseMAC(f[i+1]); err == nil {
					return mac, nil
				}
			}
		}
	}
	out, err := t.srv.Run("cat", "/sys/class/net/p0/address")
	if err != nil {
		return nil, err
	}
	return net.ParseMAC(strings.TrimSpace(out))
}
