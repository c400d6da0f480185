package vpn

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/fwd"
)

// TunnelConfig sizes a Tunnel. Zero fields take the defaults.
type TunnelConfig struct {
	Queues       int // worker queues that call Decap/Encap (default 1)
	MaxPeers     int // peer-ids 0..MaxPeers-1 (default 1024)
	ReplayWindow int // packets (default DefaultReplayWindow)
	PuntRing     int // control packets buffered per queue (default 256)
	EventRing    int // events buffered per queue (default 256)
}

// Tunnel is the OpenVPN data channel as an fwd.Tunnel: it decrypts P_DATA_V2
// datagrams to inner IP packets and encrypts inner IP packets to P_DATA_V2
// datagrams, in place, for the peers the control plane installs.
//
// Threading: Decap(q, …) and Encap(q, …) are called by worker q only, for
// each q < Queues; they never allocate (except to publish a peer's new
// address after a float), lock or block. Every other method is for the
// control plane, may be called from any goroutine and is serialised
// internally; it changes what workers see only by publishing new peer
// tables and key sets through atomic pointers.
type Tunnel struct {
	peers atomic.Pointer[peerTable]
	clock atomic.Int64 // coarse time in ns since start, set by Tick/Poll
	start time.Time
	cfg   TunnelConfig

	queues []queueState

	// controlReady is signalled (without blocking) once per Decap batch
	// that punted a control packet, so the control plane can sleep on it.
	controlReady chan struct{}

	mu      sync.Mutex // control plane only; guards what follows
	readRR  int        // ReadControl's next queue
	pending []Event    // events raised by control-plane calls
	dropped atomic.Uint64
}

// queueState is what worker q writes; padded so queues do not share lines.
type queueState struct {
	drops  [NumTunnelDrops]atomic.Uint64
	pings  atomic.Uint64
	ipID   uint16
	punt   puntRing
	events eventRing
	_      [64]byte
}

var _ fwd.Tunnel = (*Tunnel)(nil)

// NewTunnel makes an empty tunnel.
func NewTunnel(cfg TunnelConfig) *Tunnel {
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if cfg.MaxPeers <= 0 {
		cfg.MaxPeers = 1024
	}
	if cfg.MaxPeers > MaxPeerID+1 {
		cfg.MaxPeers = MaxPeerID + 1
	}
	if cfg.ReplayWindow <= 0 {
		cfg.ReplayWindow = DefaultReplayWindow
	}
	if cfg.PuntRing <= 0 {
		cfg.PuntRing = 256
	}
	if cfg.EventRing <= 0 {
		cfg.EventRing = 256
	}
	t := &Tunnel{cfg: cfg, start: time.Now(), queues: make([]queueState, cfg.Queues), controlReady: make(chan struct{}, 1)}
	for i := range t.queues {
		t.queues[i].punt.init(cfg.PuntRing)
		t.queues[i].events.init(cfg.EventRing)
	}
	t.peers.Store(&peerTable{peers: make([]atomic.Pointer[peer], cfg.MaxPeers)})
	return t
}

// Errors of the control-plane methods.
var (
	ErrPeerID     = errors.New("vpn: peer-id out of range")
	ErrPeerExists = errors.New("vpn: peer-id in use")
	ErrNoPeer     = errors.New("vpn: no such peer")
	ErrNoKey      = errors.New("vpn: no such key")
	ErrExhausted  = errors.New("vpn: the key's packet-ids are used up")
	ErrAddress    = errors.New("vpn: remote address invalid, or local address of another family")
)

// AddPeer installs a peer with no keys; it receives nothing until InstallKey.
func (t *Tunnel) AddPeer(c PeerConfig) error {
	if c.ID >= uint32(t.cfg.MaxPeers) {
		return ErrPeerID
	}
	ep, err := newEndpoint(c.Remote, c.Local)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.peers.Load()
	if old.get(c.ID) != nil {
		return ErrPeerExists
	}
	p := &peer{id: c.ID, comp: c.Comp, pingEvery: int64(c.PingEvery), timeout: int64(c.Timeout)}
	p.ep.Store(ep)
	p.keys.Store(&keySet{})
	p.sources.Store(newSourceSet(c.AllowedSources))
	now := t.clock.Load()
	p.lastRecv.Store(now)
	p.lastSent.Store(now)
	p.pingNoted.Store(-1)
	t.publish(old, c.ID, p)
	return nil
}

// newEndpoint checks an address pair. local may be left invalid: the first
// authenticated packet from the peer teaches it (as the kernel module
// learns its local address), and Encap drops until then.
func newEndpoint(remote, local netip.AddrPort) (*endpoint, error) {
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	if local.IsValid() {
		local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	}
	if !remote.IsValid() || local.IsValid() && remote.Addr().Is4() != local.Addr().Is4() {
		return nil, ErrAddress
	}
	return newEndpointOf(remote, local), nil
}

// publish sets peers[id] = p. Caller holds t.mu.
func (t *Tunnel) publish(tab *peerTable, id uint32, p *peer) {
	tab.peers[id].Store(p)
}

// RemovePeer forgets a peer; its packets are dropped as unknown from now on.
func (t *Tunnel) RemovePeer(id uint32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.peers.Load()
	if old.get(id) == nil {
		return ErrNoPeer
	}
	t.publish(old, id, nil)
	return nil
}

// SetRemote moves a peer to a new client address (e.g. when the control
// channel learns it first).
func (t *Tunnel) SetRemote(id uint32, remote, local netip.AddrPort) error {
	p := t.peers.Load().get(id)
	if p == nil {
		return ErrNoPeer
	}
	ep, err := newEndpoint(remote, local)
	if err != nil {
		return err
	}
	p.ep.Store(ep)
	return nil
}

// SetAllowedSources replaces the peer's allowed inner source prefixes
// (see PeerConfig.AllowedSources), e.g. when iroutes change.
func (t *Tunnel) SetAllowedSources(id uint32, prefixes []netip.Prefix) error {
	p := t.peers.Load().get(id)
	if p == nil {
		return ErrNoPeer
	}
	p.sources.Store(newSourceSet(prefixes))
	return nil
}

// InstallKey puts a new key into a slot of the peer, replacing what was
// there, with a fresh replay window and packet-id counter.
func (t *Tunnel) InstallKey(id uint32, slot Slot, km *KeyMaterial) error {
	if slot > Secondary {
		return ErrNoKey
	}
	dk, err := NewDataKey(km)
	if err != nil {
		return err
	}
	sk := &slotKey{key: dk}
	sk.replay.init(t.cfg.ReplayWindow)
	return t.editKeys(id, func(s *keySet) error { s.slot[slot] = sk; return nil })
}

// SetPrimary makes the key with key_id kid the sending key; the key that
// was primary becomes secondary and keeps receiving.
func (t *Tunnel) SetPrimary(id uint32, kid uint8) error {
	return t.editKeys(id, func(s *keySet) error {
		switch {
		case s.slot[Primary] != nil && s.slot[Primary].key.keyID == kid:
			return nil
		case s.slot[Secondary] != nil && s.slot[Secondary].key.keyID == kid:
			s.slot[Primary], s.slot[Secondary] = s.slot[Secondary], s.slot[Primary]
			return nil
		}
		return ErrNoKey
	})
}

// DropKey removes the key with key_id kid (the lame duck at tran-window).
func (t *Tunnel) DropKey(id uint32, kid uint8) error {
	return t.editKeys(id, func(s *keySet) error {
		for i, k := range s.slot {
			if k != nil && k.key.keyID == kid {
				s.slot[i] = nil
				return nil
			}
		}
		return ErrNoKey
	})
}

func (t *Tunnel) editKeys(id uint32, edit func(*keySet) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers.Load().get(id)
	if p == nil {
		return ErrNoPeer
	}
	next := *p.keys.Load()
	if err := edit(&next); err != nil {
		return err
	}
	p.keys.Store(&next)
	return nil
}

// SealPing returns a keepalive ping for the peer, a UDP payload ready for
// the control plane to send to the returned address from the peer's local
// address. It uses the primary key's packet-id sequence like any packet.
func (t *Tunnel) SealPing(id uint32) (payload []byte, to netip.AddrPort, err error) {
	p := t.peers.Load().get(id)
	if p == nil {
		return nil, to, ErrNoPeer
	}
	k := p.keys.Load().slot[Primary]
	if k == nil {
		return nil, to, ErrNoKey
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	pid, ok := t.nextPacketID(nil, p, k)
	if !ok {
		return nil, to, ErrExhausted
	}
	buf := make([]byte, DataHeaderLen+maxCompPrefix+len(PingMagic)+1+TagLen)
	off := DataHeaderLen + maxCompPrefix
	copy(buf[off:], PingMagic[:])
	off, n := p.comp.frame(buf, off, len(PingMagic))
	out := k.key.Seal(buf[off-DataHeaderLen:off:len(buf)], p.id, pid, buf[off:off+n])
	p.stats.txPackets.Add(1)
	p.lastSent.Store(t.clock.Load())
	return out, p.ep.Load().remote, nil
}

// nextPacketID takes the key's next packet-id, reporting wear-out once at
// PacketIDWrapTrigger and refusing (once reported) past 2^32-1. qs is the
// calling worker's queue, or nil for the control plane (holding t.mu).
func (t *Tunnel) nextPacketID(qs *queueState, p *peer, k *slotKey) (uint32, bool) {
	id := k.txLast.Add(1)
	if id < PacketIDWrapTrigger {
		return uint32(id), true
	}
	if id <= maxPacketID {
		if !k.wearNoted.Load() && k.wearNoted.CompareAndSwap(false, true) {
			t.event(qs, Event{Kind: EventKeyWearOut, Peer: p.id, KeyID: k.key.keyID})
		}
		return uint32(id), true
	}
	if !k.spentNoted.Load() && k.spentNoted.CompareAndSwap(false, true) {
		t.event(qs, Event{Kind: EventKeyExhausted, Peer: p.id, KeyID: k.key.keyID})
	}
	k.txLast.Store(maxPacketID + 1) // stay put: no wrap, however long it runs
	return 0, false
}

// event queues e for Poll: on the worker's ring, or, for a control-plane
// caller (qs == nil, holding t.mu), on a plain slice.
func (t *Tunnel) event(qs *queueState, e Event) {
	if qs == nil {
		t.pending = append(t.pending, e)
		return
	}
	if !qs.events.put(e) {
		t.dropped.Add(1)
	}
}

// Tick sets the tunnel's coarse clock, which workers read once per batch
// for last-seen times. Poll calls it; call it alone about once a second if
// Poll runs less often.
func (t *Tunnel) Tick(now time.Time) { t.clock.Store(int64(now.Sub(t.start))) }

// Poll updates the clock, appends the events the workers queued since the
// last call and the keepalive events now due (EventPingDue, EventExpired)
// to dst, and returns it. Call it from one control goroutine, e.g. every
// second.
func (t *Tunnel) Poll(now time.Time, dst []Event) []Event {
	t.Tick(now)
	t.mu.Lock()
	defer t.mu.Unlock()
	dst = append(dst, t.pending...)
	t.pending = t.pending[:0]
	for i := range t.queues {
		for {
			e, ok := t.queues[i].events.get()
			if !ok {
				break
			}
			dst = append(dst, e)
		}
	}
	clock := t.clock.Load()
	tab := t.peers.Load()
	for i := range tab.peers {
		p := tab.peers[i].Load()
		if p == nil {
			continue
		}
		if p.timeout > 0 && clock-p.lastRecv.Load() > p.timeout {
			if !p.expiredNoted.Swap(true) {
				dst = append(dst, Event{Kind: EventExpired, Peer: p.id})
			}
		} else {
			p.expiredNoted.Store(false)
		}
		if last := p.lastSent.Load(); p.pingEvery > 0 && clock-last >= p.pingEvery && p.pingNoted.Swap(last) != last {
			dst = append(dst, Event{Kind: EventPingDue, Peer: p.id})
		}
	}
	return dst
}

// ControlReady delivers a token after workers punted control packets: wait
// on it, then call ReadControl until it reports empty.
func (t *Tunnel) ControlReady() <-chan struct{} { return t.controlReady }

// ReadControl copies the next punted control packet into buf and returns it.
// ok is false when every queue's ring is empty. Data aliases buf.
func (t *Tunnel) ReadControl(buf []byte) (pkt ControlPacket, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for range t.queues {
		q := t.readRR
		t.readRR = (t.readRR + 1) % len(t.queues)
		n, from, to, ok := t.queues[q].punt.get(buf)
		if ok {
			return ControlPacket{From: from, To: to, Queue: q, Data: buf[:n]}, true
		}
	}
	return pkt, false
}

// TunnelStats are the tunnel-wide counters.
type TunnelStats struct {
	Drops         [NumTunnelDrops]uint64 // all drops by reason, peers or not
	PingsReceived uint64
	EventsDropped uint64 // events lost because a ring was full
	Peers         int
}

// Stats sums the per-queue counters.
func (t *Tunnel) Stats() TunnelStats {
	var s TunnelStats
	for i := range t.queues {
		q := &t.queues[i]
		for r := range q.drops {
			s.Drops[r] += q.drops[r].Load()
		}
		s.PingsReceived += q.pings.Load()
	}
	s.EventsDropped = t.dropped.Load()
	tab := t.peers.Load()
	for i := range tab.peers {
		if tab.peers[i].Load() != nil {
			s.Peers++
		}
	}
	return s
}

// LastActivity reports when the peer last sent an authenticated packet and
// when the tunnel last sent it one, on the coarse clock (AddPeer counts as
// both, so a peer that never speaks still expires).
func (t *Tunnel) LastActivity(id uint32) (rx, tx time.Time) {
	p := t.peers.Load().get(id)
	if p == nil {
		return rx, tx
	}
	return t.start.Add(time.Duration(p.lastRecv.Load())), t.start.Add(time.Duration(p.lastSent.Load()))
}

// PeerStats returns a snapshot of one peer's counters and state.
func (t *Tunnel) PeerStats(id uint32) (PeerStats, bool) {
	p := t.peers.Load().get(id)
	if p == nil {
		return PeerStats{}, false
	}
	ep := p.ep.Load()
	s := PeerStats{
		Remote: ep.remote, Local: ep.local,
		RxPackets: p.stats.rxPackets.Load(), RxBytes: p.stats.rxBytes.Load(),
		TxPackets: p.stats.txPackets.Load(), TxBytes: p.stats.txBytes.Load(),
		PingsReceived: p.stats.pings.Load(),
		LastRecv:      time.Duration(p.lastRecv.Load()), LastSent: time.Duration(p.lastSent.Load()),
		PrimaryKeyID: -1, SecondaryKeyID: -1,
	}
	for r := range s.Drops {
		s.Drops[r] = p.stats.drops[r].Load()
	}
	ks := p.keys.Load()
	if k := ks.slot[Primary]; k != nil {
		s.PrimaryKeyID = int(k.key.keyID)
		s.TxPacketID = k.txLast.Load()
	}
	if k := ks.slot[Secondary]; k != nil {
		s.SecondaryKeyID = int(k.key.keyID)
	}
	return s, true
}
