package vpn

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/csum"
	"golang.org/x/sys/unix"
)

// The VPN data path through the engine's worker loop, in process: an
// fwd.Engine with a Tunnel registered as the daemon registers it
// (appliance/daemon/vpn.go startVPN and AddPeer: SetTunnel on the VPN port,
// a /32 tunnel route and AllowedSources per peer), two in-memory ports,
// and Worker.Poll, which is what the daemon's runner calls in its loop.
//
// The ports hand out frames prepared between polls (sealed by each peer's
// client key with its next packet-id, or plain LAN packets), so Rx is a
// descriptor copy as on a NIC: no frame copy, and no replayed packet-id.

// Addresses: the appliance's WAN side, the clients behind a gateway, the
// LAN host, and the VPN pool the clients' inner addresses come from.
var (
	ebWAN     = netip.MustParsePrefix("198.18.0.1/24")
	ebGateway = netip.MustParseAddr("198.18.0.254")
	ebClients = netip.MustParsePrefix("198.18.64.0/18")
	ebLAN     = netip.MustParsePrefix("198.19.0.1/24")
	ebHost    = netip.MustParseAddr("198.19.0.10")
	ebVPNPool = netip.MustParsePrefix("198.19.128.0/17")

	ebMACWAN  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01}
	ebMACLAN  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	ebMACGW   = net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 0xfe}
	ebMACHost = net.HardwareAddr{0x02, 0xbb, 0, 0, 0, 0x0a}
)

const (
	ebVPNPort   = 1194
	ebBufSize   = fwd.Headroom + 2048
	ebPoolBufs  = 1024 // frames prepared between rounds of polls
	ebWANPort   = 0
	ebLANPort   = 1
	ebEthLen    = 14
	ebInnerPort = 5000 // the inner packets' UDP source port
)

// Traffic the rig prepares.
type ebTraffic uint8

const (
	toLAN      ebTraffic = iota // P_DATA_V2 from the clients: Decap, route to the LAN host
	toClient                    // IP from the LAN host to the clients' inner addresses: route, Encap
	plainToLAN                  // the same inner packets, sent in the clear from the WAN: routing alone
	plainToWAN                  // the LAN host's packets to the clients' outer addresses, in the clear
)

func (t ebTraffic) String() string {
	return [...]string{"client-to-LAN", "LAN-to-client", "plain-to-LAN", "plain-to-WAN"}[t]
}

// ebPool is the buffers both ports share (one pool: the engine forwards
// between them without copying, as between AF_XDP ports of one UMEM).
type ebPool struct {
	bufs [][]byte
	free []uint64
}

// ebPort is an in-memory fwd.Port. Rx hands out the frames the rig
// prepared, in order; Tx and Free return buffers to the pool and count.
type ebPort struct {
	info  fwd.PortInfo
	pool  *ebPool
	ready []fwd.Packet // prepared frames; Rx takes from head
	head  int

	txPackets, txBytes, freed uint64
	capture                   [][]byte // when non-nil, Tx keeps a copy of each frame (tests only)
}

func (p *ebPort) Info() fwd.PortInfo { return p.info }

func (p *ebPort) Rx(q int, b *fwd.Batch) int {
	n := min(b.Room(), len(p.ready)-p.head)
	k := len(b.Pkts)
	b.Pkts = b.Pkts[:k+n]
	copy(b.Pkts[k:], p.ready[p.head:p.head+n])
	p.head += n
	return n
}

func (p *ebPort) Tx(q int, b *fwd.Batch) int {
	for i := range b.Pkts {
		pk := &b.Pkts[i]
		p.txBytes += uint64(pk.Len)
		if p.capture != nil {
			p.capture = append(p.capture, append([]byte(nil), pk.Data()...))
		}
		p.pool.free = append(p.pool.free, pk.Handle)
	}
	n := len(b.Pkts)
	p.txPackets += uint64(n)
	b.Reset()
	return n
}

func (p *ebPort) Free(q int, b *fwd.Batch) {
	for i := range b.Pkts {
		p.pool.free = append(p.pool.free, b.Pkts[i].Handle)
	}
	p.freed += uint64(len(b.Pkts))
	b.Reset()
}

func (p *ebPort) Alloc(q int, b *fwd.Batch, n int) int {
	got := 0
	for ; got < n && b.Room() > 0 && len(p.pool.free) > 0; got++ {
		h := p.pool.free[len(p.pool.free)-1]
		p.pool.free = p.pool.free[:len(p.pool.free)-1]
		b.Add(&fwd.Packet{Buf: p.pool.bufs[h], Handle: h, Off: fwd.Headroom, Pool: 1})
	}
	return got
}

func (p *ebPort) Close() error { return nil }

// ebPeer is one client: the key it seals with (the tunnel's mirror), its
// next packet-id and its addresses.
type ebPeer struct {
	key   *DataKey
	pid   uint32
	outer netip.AddrPort
	inner netip.Addr
}

// engineRig is the engine and tunnel under test with its peers.
type engineRig struct {
	e     *fwd.Engine
	w     *fwd.Worker
	tun   *Tunnel
	ports [2]*ebPort
	pool  *ebPool
	peers []ebPeer
	next  int // the peer the next prepared frame is from or to
	size  int // inner IP packet length
	now   int64
}

func newEngineRig(t testing.TB, c Cipher, peers, size int) *engineRig {
	r := &engineRig{size: size, now: int64(time.Hour)}
	r.pool = &ebPool{free: make([]uint64, 0, ebPoolBufs)}
	mem := make([]byte, ebPoolBufs*ebBufSize)
	for i := range ebPoolBufs {
		r.pool.bufs = append(r.pool.bufs, mem[i*ebBufSize:(i+1)*ebBufSize:(i+1)*ebBufSize])
		r.pool.free = append(r.pool.free, uint64(i))
	}
	var ports []fwd.Port
	for i, mac := range []net.HardwareAddr{ebMACWAN, ebMACLAN} {
		r.ports[i] = &ebPort{pool: r.pool, ready: make([]fwd.Packet, 0, ebPoolBufs),
			info: fwd.PortInfo{Name: [...]string{"wan", "lan"}[i], MAC: mac, MTU: 1500, Queues: 1, Pool: 1, BufSize: ebBufSize}}
		ports = append(ports, r.ports[i])
	}
	e, err := fwd.New(fwd.Config{Now: func() int64 { return r.now }}, ports)
	if err != nil {
		t.Fatal(err)
	}
	r.e, r.w = e, e.Workers()[0]
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.AddAddress(ebWANPort, ebWAN))
	must(e.AddAddress(ebLANPort, ebLAN))
	must(e.SetNeighbour(ebWANPort, ebGateway, ebMACGW))
	must(e.SetNeighbour(ebLANPort, ebHost, ebMACHost))
	routes := []fwd.Route{{Prefix: ebClients, NextHop: fwd.NextHop{Port: ebWANPort, Via: ebGateway}}}

	r.tun = NewTunnel(TunnelConfig{Queues: 1, MaxPeers: peers})
	e.SetTunnel(r.tun, ebVPNPort)
	local := netip.AddrPortFrom(ebWAN.Addr(), ebVPNPort)
	for i := range peers {
		id := uint32(i)
		outer := netip.AddrPortFrom(nthAddr(ebClients, i+1), uint16(40000+i%20000))
		inner := nthAddr(ebVPNPool, i+2)
		// Local as the first authenticated packet would have taught it.
		must(r.tun.AddPeer(PeerConfig{ID: id, Remote: outer, Local: local, AllowedSources: []netip.Prefix{netip.PrefixFrom(inner, 32)}}))
		srv, cli := testKeys(c, 0)
		binary.BigEndian.PutUint16(srv.SendKey[:], uint16(i)) // a key of its own per peer
		binary.BigEndian.PutUint16(srv.RecvKey[:], uint16(i))
		cli.SendKey, cli.RecvKey = srv.RecvKey, srv.SendKey
		must(r.tun.InstallKey(id, Primary, srv))
		r.peers = append(r.peers, ebPeer{key: mustKey(t, cli), outer: outer, inner: inner})
		routes = append(routes, fwd.Route{Prefix: netip.PrefixFrom(inner, 32), NextHop: fwd.NextHop{Tunnel: true, Peer: id}})
	}
	must(e.AddRoutes(routes))
	return r
}

// nthAddr is the i-th address of an IPv4 prefix.
func nthAddr(p netip.Prefix, i int) netip.Addr {
	a := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(a[:]) + uint32(i)
	binary.BigEndian.PutUint32(a[:], v)
	return netip.AddrFrom4(a)
}

// prepare fills every free buffer with a frame of traffic tr and queues it
// on the port it arrives at; each frame is for the next peer in turn.
func (r *engineRig) prepare(tr ebTraffic) {
	in := r.ports[ebWANPort]
	if tr == toClient || tr == plainToWAN {
		in = r.ports[ebLANPort]
	}
	for _, p := range r.ports { // what the last round left unreceived goes back first
		for _, pk := range p.ready[p.head:] {
			r.pool.free = append(r.pool.free, pk.Handle)
		}
		p.ready, p.head = p.ready[:0], 0
	}
	for _, h := range r.pool.free {
		id := r.next
		pe := &r.peers[id]
		if r.next++; r.next == len(r.peers) {
			r.next = 0
		}
		buf := r.pool.bufs[h]
		var n int
		switch tr {
		case toLAN:
			n = r.sealedFrame(buf[fwd.Headroom:], pe, uint32(id))
		case toClient:
			n = ipFrame(buf[fwd.Headroom:], ebMACLAN, ebMACHost, ebHost, pe.inner, r.size)
		case plainToLAN:
			n = ipFrame(buf[fwd.Headroom:], ebMACWAN, ebMACGW, pe.inner, ebHost, r.size)
		case plainToWAN:
			n = ipFrame(buf[fwd.Headroom:], ebMACLAN, ebMACHost, ebHost, pe.outer.Addr(), r.size)
		}
		in.ready = append(in.ready, fwd.Packet{Buf: buf, Handle: h, Off: fwd.Headroom, Len: uint16(n), Pool: 1})
	}
	r.pool.free = r.pool.free[:0]
}

// ipFrame writes an Ethernet frame carrying an IPv4/UDP packet of n bytes
// from src to dst at f and returns the frame's length. The payload is left
// as it is: its bytes do not matter.
func ipFrame(f []byte, dstMAC, srcMAC net.HardwareAddr, src, dst netip.Addr, n int) int {
	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ipUDP(f[ebEthLen:], src, dst, ebInnerPort, 9, n)
	return ebEthLen + n
}

// ipUDP writes IPv4 and UDP headers for a datagram of n bytes in all.
func ipUDP(ip []byte, src, dst netip.Addr, sport, dport uint16, n int) {
	ip[0], ip[1] = 0x45, 0
	binary.BigEndian.PutUint16(ip[2:], uint16(n))
	binary.BigEndian.PutUint32(ip[4:], 0)
	ip[8], ip[9] = 64, protoUDP
	binary.BigEndian.PutUint16(ip[10:], 0)
	s, d := src.As4(), dst.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:], csum.Checksum(ip[:ipv4HeaderLen]))
	udp := ip[ipv4HeaderLen:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(n-ipv4HeaderLen))
	binary.BigEndian.PutUint16(udp[6:], 0)
}

// sealedFrame writes the client's next P_DATA_V2 datagram carrying an inner
// packet of r.size bytes to the LAN host, as it arrives from the gateway.
func (r *engineRig) sealedFrame(f []byte, pe *ebPeer, id uint32) int {
	const hdr = ebEthLen + ipv4HeaderLen + udpHeaderLen
	plain := f[hdr+DataHeaderLen : hdr+DataHeaderLen+r.size]
	ipUDP(plain, pe.inner, ebHost, ebInnerPort, 9, r.size)
	pe.pid++
	pe.key.Seal(f[hdr:hdr:len(f)], id, pe.pid, plain)
	n := ipv4HeaderLen + udpHeaderLen + DataHeaderLen + r.size
	copy(f[0:6], ebMACWAN)
	copy(f[6:12], ebMACGW)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ipUDP(f[ebEthLen:], pe.outer.Addr(), ebWAN.Addr(), pe.outer.Port(), ebVPNPort, n)
	return ebEthLen + n
}

// polls runs n polls of the worker, as the runner's loop does between its
// idle checks, and returns the packets received.
func (r *engineRig) polls(n int) int {
	got := 0
	for range n {
		got += r.w.Poll()
	}
	return got
}

// measuredPolls is polls for the VPN traffic the benchmark measures, in a
// function of its own so that callgrind counts only it
// (--toggle-collect='*measuredPolls').
//
//go:noinline
func (r *engineRig) measuredPolls(n int) int {
	got := 0
	for range n {
		got += r.w.Poll()
	}
	return got
}

// round prepares a pool's worth of traffic and polls until it is through;
// it returns the packets received and the polls it took.
func (r *engineRig) round(tr ebTraffic) (pkts, polls int) {
	r.prepare(tr)
	n := (len(r.ports[0].ready) + len(r.ports[1].ready) + 63) / 64
	return r.polls(n), n
}

// TestEnginePathForwards runs both directions through the engine and checks
// what leaves: the LAN host gets the inner packets, the clients get
// datagrams their keys open to the LAN host's packets; nothing is dropped.
func TestEnginePathForwards(t *testing.T) {
	for _, c := range []Cipher{AES256GCM, ChaCha20Poly1305} {
		r := newEngineRig(t, c, 100, 200)
		for _, tr := range []ebTraffic{toLAN, toClient, plainToLAN, plainToWAN} {
			out := r.ports[ebLANPort]
			if tr == toClient || tr == plainToWAN {
				out = r.ports[ebWANPort]
			}
			out.capture = [][]byte{}
			first := r.next
			pkts, _ := r.round(tr)
			if pkts != ebPoolBufs || len(out.capture) != ebPoolBufs {
				t.Fatalf("%v %v: %d received, %d sent; engine drops %v, tunnel drops %v",
					c, tr, pkts, len(out.capture), r.e.Stats().Drops, r.tun.Stats().Drops)
			}
			for i, f := range out.capture {
				pe := &r.peers[(first+i)%len(r.peers)]
				r.checkSent(t, tr, f, pe)
			}
			out.capture = nil
		}
		if r.ports[0].freed+r.ports[1].freed != 0 || len(r.pool.free) != ebPoolBufs {
			t.Fatalf("%v: %d buffers freed as drops, %d of %d back in the pool", c,
				r.ports[0].freed+r.ports[1].freed, len(r.pool.free), ebPoolBufs)
		}
	}
}

func (r *engineRig) checkSent(t *testing.T, tr ebTraffic, f []byte, pe *ebPeer) {
	t.Helper()
	dstMAC, src, dst := ebMACHost, pe.inner, ebHost
	switch tr {
	case toClient, plainToWAN:
		dstMAC, src, dst = ebMACGW, ebWAN.Addr(), pe.outer.Addr()
		if tr == plainToWAN {
			src = ebHost
		}
	}
	ip := f[ebEthLen:]
	if [6]byte(f[:6]) != [6]byte(dstMAC) || netip.AddrFrom4([4]byte(ip[12:16])) != src ||
		netip.AddrFrom4([4]byte(ip[16:20])) != dst || csum.Checksum(ip[:ipv4HeaderLen]) != 0 {
		t.Fatalf("%v: sent % x", tr, f[:min(len(f), 48)])
	}
	if tr != toClient {
		if len(ip) != r.size {
			t.Fatalf("%v: sent %d bytes of IP, want %d", tr, len(ip), r.size)
		}
		return
	}
	udp := ip[ipv4HeaderLen:]
	if binary.BigEndian.Uint16(udp[0:]) != ebVPNPort || binary.BigEndian.Uint16(udp[2:]) != pe.outer.Port() {
		t.Fatalf("%v: UDP ports % x", tr, udp[:4])
	}
	payload := append(make([]byte, 0, len(udp)+TagLen), udp[udpHeaderLen:]...)
	plain, _, err := pe.key.Open(payload)
	if err != nil || len(plain) != r.size || netip.AddrFrom4([4]byte(plain[16:20])) != pe.inner ||
		netip.AddrFrom4([4]byte(plain[12:16])) != ebHost {
		t.Fatalf("%v: the client cannot open what it was sent: %v, % x", tr, err, plain[:min(len(plain), 20)])
	}
}

// The whole path allocates nothing: a round of polls in each direction,
// with the frames prepared outside the measured function.
func TestEnginePathAllocs(t *testing.T) {
	for _, tr := range []ebTraffic{toLAN, toClient} {
		for _, c := range []Cipher{AES256GCM, ChaCha20Poly1305} {
			r := newEngineRig(t, c, 100, 1400)
			r.round(tr) // learn, warm
			var pkts int
			allocs := testing.AllocsPerRun(20, func() {
				r.prepare(tr)
				pkts += r.measuredPolls(ebPoolBufs / 64)
			})
			if allocs != 0 {
				t.Errorf("%v %v: %v allocations per %d packets", tr, c, allocs, ebPoolBufs)
			}
			if pkts < 20*ebPoolBufs || r.ports[0].freed+r.ports[1].freed != 0 {
				t.Errorf("%v %v: %d packets received, %d dropped", tr, c, pkts, r.ports[0].freed+r.ports[1].freed)
			}
		}
	}
}

// threadCPU is the calling thread's CPU time: on a shared machine, waiting
// for a core does not inflate it as it does the wall clock.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// aeadFloor is the AEAD alone for the packets of one direction: crypto/
// cipher's Open (client to LAN) or Seal (LAN to client) of size bytes with
// the P_DATA_V2 header as additional data, out of place.
type aeadFloor struct {
	aead     cipher.AEAD
	open     bool
	nonce    []byte
	ad       []byte
	src, dst []byte
}

func newAEADFloor(t testing.TB, c Cipher, size int, open bool) *aeadFloor {
	km, _ := testKeys(c, 0)
	a, err := newAEAD(c, km.SendKey[:c.KeyLen()])
	if err != nil {
		t.Fatal(err)
	}
	f := &aeadFloor{aead: a, open: open, nonce: make([]byte, nonceLen), ad: make([]byte, adLen),
		src: make([]byte, size+TagLen), dst: make([]byte, size+TagLen)}
	if open {
		f.src = a.Seal(f.src[:0], f.nonce, f.src[:size], f.ad)
	} else {
		f.src = f.src[:size]
	}
	return f
}

//go:noinline
func (f *aeadFloor) run(n int) {
	for range n {
		if f.open {
			if _, err := f.aead.Open(f.dst[:0], f.nonce, f.src, f.ad); err != nil {
				panic(err)
			}
		} else {
			f.aead.Seal(f.dst[:0], f.nonce, f.src, f.ad)
		}
	}
}

// BenchmarkEnginePath: one op is one poll of 64 packets through the VPN
// path (client to LAN: Decap's AEAD open, route, TX; LAN to client: route,
// Encap's AEAD seal, route, TX), side by side with the floor in the same
// process and rounds: the same packets routed in the clear (route-*), and
// the AEAD alone for the same bytes (aead-*). ns/op and allocs/op are the
// VPN polls'; *-cpu-ns/pkt are thread CPU time per packet, which waiting
// for a core does not inflate; rest-cpu-ns/pkt is what the VPN path costs
// beyond routing and the AEAD. Timings on a busy machine move; the
// instruction counts (docs/vpn-datapath.md) do not.
func BenchmarkEnginePath(b *testing.B) {
	for _, tr := range []ebTraffic{toLAN, toClient} {
		for _, peers := range []int{100, 10000} {
			for _, size := range []int{64, 512, 1400} {
				for _, c := range []Cipher{AES256GCM, ChaCha20Poly1305} {
					b.Run(fmt.Sprintf("%v/peers=%d/%d/%v", tr, peers, size, c), func(b *testing.B) {
						benchEnginePath(b, tr, peers, size, c)
					})
				}
			}
		}
	}
}

func benchEnginePath(b *testing.B, tr ebTraffic, peers, size int, c Cipher) {
	r := newEngineRig(b, c, peers, size)
	plain := plainToLAN
	if tr == toClient {
		plain = plainToWAN
	}
	floor := newAEADFloor(b, c, size, tr == toLAN)
	for range 2 { // learn, warm the tables
		r.round(tr)
		r.round(plain)
	}
	runtime.GC() // not during the rounds: see benchEnginePathInstructions
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var vpnCPU, routeCPU, aeadCPU time.Duration
	var vpnPkts, routePkts, aeadPkts int
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	for polls := 0; polls < b.N; {
		r.prepare(tr)
		n := min(ebPoolBufs/64, b.N-polls)
		b.StartTimer()
		c0 := threadCPU()
		vpnPkts += r.measuredPolls(n)
		vpnCPU += threadCPU() - c0
		b.StopTimer()
		polls += n
		// Drop what this round left prepared, so the next starts afresh.
		r.prepare(plain)
		c0 = threadCPU()
		routePkts += r.polls(ebPoolBufs / 64)
		routeCPU += threadCPU() - c0
		c0 = threadCPU()
		floor.run(n * 64)
		aeadCPU += threadCPU() - c0
		aeadPkts += n * 64
	}
	if d := r.ports[0].freed + r.ports[1].freed; d != 0 {
		b.Fatalf("%d packets dropped: engine %v, tunnel %v", d, r.e.Stats().Drops, r.tun.Stats().Drops)
	}
	per := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(vpnPkts), "ns/pkt")
	b.ReportMetric(per(vpnCPU, vpnPkts), "cpu-ns/pkt")
	b.ReportMetric(per(routeCPU, routePkts), "route-cpu-ns/pkt")
	b.ReportMetric(per(aeadCPU, aeadPkts), "aead-cpu-ns/pkt")
	b.ReportMetric(per(vpnCPU, vpnPkts)-per(routeCPU, routePkts)-per(aeadCPU, aeadPkts), "rest-cpu-ns/pkt")
	b.ReportMetric(per(vpnCPU, vpnPkts)/per(aeadCPU, aeadPkts), "x-aead")
}

// BenchmarkEnginePathInstructions is BenchmarkEnginePath for callgrind:
// one op is one poll of 64 packets (vpn: the VPN traffic; route: the same
// packets in the clear) or 64 AEAD operations alone (aead), each in one
// call of counted, so that --toggle-collect='*vpn.counted' counts exactly
// the ops and nothing of the preparation between them
// (docs/vpn-datapath.md has the commands). Each op follows a Gosched: a
// goroutine preempted inside the counted call would move to the scheduler's
// stack and back, which callgrind's call tracking cannot follow.
func BenchmarkEnginePathInstructions(b *testing.B) {
	for _, tr := range []ebTraffic{toLAN, toClient} {
		for _, peers := range []int{100, 10000} {
			for _, size := range []int{64, 512, 1400} {
				for _, c := range []Cipher{AES256GCM, ChaCha20Poly1305} {
					for _, stage := range []string{"vpn", "route", "aead"} {
						b.Run(fmt.Sprintf("%v/peers=%d/%d/%v/%s", tr, peers, size, c, stage), func(b *testing.B) {
							benchEnginePathInstructions(b, tr, peers, size, c, stage)
						})
					}
				}
			}
		}
	}
}

func benchEnginePathInstructions(b *testing.B, tr ebTraffic, peers, size int, c Cipher, stage string) {
	r := newEngineRig(b, c, peers, size)
	if stage == "route" {
		tr = map[ebTraffic]ebTraffic{toLAN: plainToLAN, toClient: plainToWAN}[tr]
	}
	floor := newAEADFloor(b, c, size, tr == toLAN)
	for range 2 {
		r.round(tr)
	}
	op := func() { r.w.Poll() }
	if stage == "aead" {
		op = func() { floor.run(64) }
	}
	// The setup's garbage must not start a collection during the ops: its
	// write barriers (on every pointer the port copies) would be counted.
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%(ebPoolBufs/64) == 0 {
			r.prepare(tr)
		}
		runtime.Gosched()
		counted(op)
	}
	b.StopTimer()
	if d := r.ports[0].freed + r.ports[1].freed; d != 0 {
		b.Fatalf("%d packets dropped: engine %v, tunnel %v", d, r.e.Stats().Drops, r.tun.Stats().Drops)
	}
}

// counted runs one op of BenchmarkEnginePathInstructions: the one function
// callgrind collects in.
//
//go:noinline
func counted(op func()) { op() }
