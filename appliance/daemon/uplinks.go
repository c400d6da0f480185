package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/vpn/control"
)

// Site-to-site uplinks ([[vpn.client]]): ovfwd as the OpenVPN client of
// another server.
//
// Each uplink's routes are installed at start as engine routes with an
// Uplink next hop: the workers copy routed packets onto their uplink rings
// and the pump goroutine drains them, seals them with the uplink's current
// data key and sends them from its kernel UDP socket in sendmmsg batches.
// What the uplink decrypts goes back into the engine with InjectIP and is
// routed like a packet out of the server's tunnel. The uplink is dialled
// (its remote resolved at every attempt), redialled with backoff until the
// first connection, then kept connected by the client's own ping-restart
// and reconnect logic.
//
// The routes stay while the uplink is down: its packets are dropped and
// counted (tx_down) instead of following a less specific route in the
// clear, which is what an operator of a site-to-site link expects (as
// openvpn's persist-tun). Routes the server pushes are logged, not
// installed: the config decides what crosses the uplink.

const (
	uplinkDialTimeout = 30 * time.Second
	uplinkBackoffMin  = time.Second
	uplinkBackoffMax  = 30 * time.Second

	// The pump drains the rings back to back while packets flow and backs
	// off to uplinkPumpIdle when they stop: the first packet after a pause
	// waits at most that long.
	uplinkPumpBusy = 50 * time.Microsecond
	uplinkPumpIdle = time.Millisecond
	// uplinkBatch packets are sealed and sent with one sendmmsg.
	uplinkBatch = 32
	// uplinkPending is how many drained packets one uplink buffers before
	// a drain pass sends them (the rings hold fwd.UplinkRingSlots a worker).
	uplinkPending = 256
)

// uplinkEngine is what uplinks need of *fwd.Engine.
type uplinkEngine interface {
	Uplinked(fn func(uplink uint16, ip []byte)) int
	InjectIP(ip []byte) error
}

// uplink is one [[vpn.client]] and its connection.
type uplink struct {
	cfg  config.VPNClient
	log  *slog.Logger
	dial func(context.Context, control.ClientConfig) (*control.Client, error)
	eng  uplinkEngine

	// client is nil until the first successful dial; the client then
	// reconnects by itself. Stored as soon as Dial returns: the receive
	// path (on the client's reader goroutine) may already need it.
	client atomic.Pointer[control.Client]

	// pump goroutine only
	batcher    *control.Batcher
	batcherFor *control.Client
	pending    [][]byte // uplinkPending buffers of MaxUplinkPacket
	npending   int

	attempts    atomic.Uint64
	txPackets   atomic.Uint64 // sealed and accepted by the socket
	txDown      atomic.Uint64 // routed here while not connected
	txErrors    atomic.Uint64 // the socket refused them
	rxPackets   atomic.Uint64 // decrypted and handed to the engine
	rxDrops     atomic.Uint64 // decrypted but refused by the engine (inject ring full, not IP)
	rxSpoofed   atomic.Uint64 // decrypted, but from a source outside the uplink's routes and tunnel subnet
	rxLinkLocal atomic.Uint64 // decrypted link-scope packets (link-local or multicast), not routed
}

// uplinks runs every configured uplink until stop is closed.
type uplinks struct {
	list []*uplink
	eng  uplinkEngine
	stop chan struct{}
	wg   sync.WaitGroup
}

// uplinkRoutes are the routes of every uplink, by prefix; uplink i is
// UplinkID i.
func uplinkRoutes(cfgs []config.VPNClient) map[netip.Prefix]route {
	out := map[netip.Prefix]route{}
	for i, c := range cfgs {
		for _, p := range c.Routes {
			out[p] = route{nh: fwd.NextHop{Uplink: true, UplinkID: uint16(i), UplinkMTU: c.MTU}}
		}
	}
	return out
}

func startUplinks(cfgs []config.VPNClient, eng uplinkEngine, log *slog.Logger) *uplinks {
	u := &uplinks{eng: eng, stop: make(chan struct{})}
	for _, c := range cfgs {
		up := &uplink{cfg: c, log: log.With("uplink", c.Name), dial: control.Dial, eng: eng,
			pending: make([][]byte, uplinkPending)}
		for i := range up.pending {
			up.pending[i] = make([]byte, fwd.MaxUplinkPacket)
		}
		up.log.Info("uplink routes", "routes", c.Routes, "mtu", c.MTU)
		u.list = append(u.list, up)
		u.wg.Add(1)
		go func() { defer u.wg.Done(); up.run(u.stop) }()
	}
	u.wg.Add(1)
	go func() { defer u.wg.Done(); u.pump() }()
	return u
}

// close stops the dial loops and the pump and closes the connected clients.
func (u *uplinks) close() {
	close(u.stop)
	u.wg.Wait()
	for _, up := range u.list {
		if c := up.client.Load(); c != nil {
			_ = c.Close()
		}
	}
}

// pump moves packets from the workers' uplink rings to the uplinks.
func (u *uplinks) pump() {
	wait := uplinkPumpBusy
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		n := u.eng.Uplinked(u.take)
		for _, up := range u.list {
			up.flush()
		}
		if n > 0 {
			wait = uplinkPumpBusy
		} else {
			wait = min(2*wait, uplinkPumpIdle)
		}
		t.Reset(wait)
		select {
		case <-u.stop:
			return
		case <-t.C:
		}
	}
}

// take is the Uplinked callback: it copies one packet into its uplink's
// pending buffers, sending them first when they are full.
func (u *uplinks) take(id uint16, ip []byte) {
	if int(id) >= len(u.list) {
		return // a route of a removed uplink; cannot happen while routes are fixed at start
	}
	up := u.list[id]
	if up.npending == len(up.pending) {
		up.flush()
	}
	b := up.pending[up.npending][:cap(up.pending[up.npending])]
	up.pending[up.npending] = b[:copy(b, ip)]
	up.npending++
}

// flush seals and sends the pending packets, or counts them dropped while
// the uplink is down. Pump goroutine only.
func (up *uplink) flush() {
	if up.npending == 0 {
		return
	}
	pkts := up.pending[:up.npending]
	up.npending = 0
	c := up.client.Load()
	if c == nil || !c.Connected() {
		up.txDown.Add(uint64(len(pkts)))
		return
	}
	if up.batcherFor != c {
		up.batcher, up.batcherFor = c.NewBatcher(uplinkBatch, fwd.MaxUplinkPacket), c
	}
	for len(pkts) > 0 {
		chunk := pkts[:min(len(pkts), uplinkBatch)]
		pkts = pkts[len(chunk):]
		n, err := up.batcher.Send(chunk)
		up.txPackets.Add(uint64(n))
		if n < len(chunk) {
			up.txErrors.Add(uint64(len(chunk) - n))
			if err != nil && up.txErrors.Load() == uint64(len(chunk)-n) {
				up.log.Warn("uplink send failed (counted as tx_errors from now on)", "err", err)
			}
		}
	}
}

// receive is the client's Receive: decrypted packets go to the engine if
// their source is one the far site may use, its routes or the tunnel
// subnet the server pushed (a strict reverse-path check, as rp_filter=1
// on a tun device); the rest are counted as rx_spoofed.
func (up *uplink) receive(ip []byte) {
	src, dst, ok := ipAddrs(ip)
	if !ok {
		up.rxDrops.Add(1) // not IP: the engine would refuse it too
		return
	}
	if linkScope(src, dst) {
		up.rxLinkLocal.Add(1) // the far end's own link traffic (IPv6 RS, MLD): not for routing
		return
	}
	if !up.sourceAllowed(src) {
		if n := up.rxSpoofed.Add(1); n&(n-1) == 0 { // 1st, 2nd, 4th, 8th, …: enough to see what it is
			up.log.Warn("uplink dropped a packet from outside its routes and tunnel subnet", "src", src, "count", n)
		}
		return
	}
	if up.eng.InjectIP(ip) != nil {
		up.rxDrops.Add(1)
		return
	}
	up.rxPackets.Add(1)
}

// ipAddrs is an IPv4 or IPv6 packet's source and destination.
func ipAddrs(ip []byte) (src, dst netip.Addr, ok bool) {
	switch {
	case len(ip) >= 20 && ip[0]>>4 == 4:
		return netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20])), true
	case len(ip) >= 40 && ip[0]>>4 == 6:
		return netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40])), true
	}
	return src, dst, false
}

// linkScope reports packets a router must not forward: from or to a
// link-local address, or to a multicast group.
func linkScope(src, dst netip.Addr) bool {
	return src.IsLinkLocalUnicast() || dst.IsLinkLocalUnicast() || dst.IsMulticast()
}

// sourceAllowed: the far site may send from its routes and the tunnel
// subnet the server pushed.
func (up *uplink) sourceAllowed(src netip.Addr) bool {
	for _, p := range up.cfg.Routes {
		if p.Contains(src) {
			return true
		}
	}
	if c := up.client.Load(); c != nil {
		if p := c.Pushed(); p != nil && (p.IPv4.Masked().Contains(src) || p.IPv6.Masked().Contains(src)) {
			return true
		}
	}
	return false
}

// run dials until connected or stopped. Once connected the client
// reconnects by itself; run returns (close closes the client connect
// stored, also when shutdown raced the dial).
func (up *uplink) run(stop <-chan struct{}) {
	backoff := uplinkBackoffMin
	for {
		err := up.connect(stop)
		if err == nil {
			return
		}
		up.log.Warn("uplink not connected; retrying", "remote", up.cfg.Remote, "err", err, "in", backoff)
		select {
		case <-stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, uplinkBackoffMax)
	}
}

func (up *uplink) connect(stop <-chan struct{}) error {
	up.attempts.Add(1)
	ua, err := net.ResolveUDPAddr("udp", up.cfg.Remote)
	if err != nil {
		return err
	}
	cc, err := control.ClientConfigFromFiles(ua.AddrPort(), up.cfg.CA, up.cfg.Cert, up.cfg.Key, up.cfg.TLSCrypt)
	if err != nil {
		return err
	}
	cc.Receive = up.receive
	cc.Logf = func(format string, args ...any) { up.log.Info(fmt.Sprintf(format, args...), "component", "vpn-client") }
	ctx, cancel := context.WithTimeout(context.Background(), uplinkDialTimeout)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	c, err := up.dial(ctx, cc)
	if err != nil {
		return err
	}
	up.client.Store(c)
	p := c.Pushed()
	up.log.Info("uplink connected", "remote", ua.AddrPort(), "v4", p.IPv4, "v6", p.IPv6,
		"pushed_routes_not_installed", p.Routes)
	return nil
}

// connected reports whether the uplink has a live tunnel, and what the
// server pushed.
func (up *uplink) connected() (*control.Pushed, bool) {
	c := up.client.Load()
	if c == nil || !c.Connected() {
		return nil, false
	}
	return c.Pushed(), true
}

// snapshot is the uplinks part of status.
func (u *uplinks) snapshot() []status.Uplink {
	var out []status.Uplink
	for _, up := range u.list {
		s := status.Uplink{Name: up.cfg.Name, Remote: up.cfg.Remote, State: "connecting", MTU: up.cfg.MTU,
			Counters: status.Counters{
				"attempts": up.attempts.Load(), "tx_packets": up.txPackets.Load(), "tx_down": up.txDown.Load(),
				"tx_errors": up.txErrors.Load(), "rx_packets": up.rxPackets.Load(), "rx_drops": up.rxDrops.Load(),
				"rx_spoofed": up.rxSpoofed.Load(), "rx_link_local": up.rxLinkLocal.Load(),
			}}
		for _, p := range up.cfg.Routes {
			s.Routes = append(s.Routes, p.String())
		}
		if p, ok := up.connected(); ok {
			s.State = "connected"
			for _, a := range []netip.Prefix{p.IPv4, p.IPv6} {
				if a.IsValid() {
					s.Addrs = append(s.Addrs, a.String())
				}
			}
		}
		out = append(out, s)
	}
	return out
}
