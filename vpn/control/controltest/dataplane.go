// Package controltest provides an in-process fake of control.DataPlane for
// tests of the control channel and of code that wires it. It is safe for
// concurrent use.
package controltest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/control"
)

// PeerState is what the fake knows about one peer.
type PeerState struct {
	Peer    control.Peer
	Keys    map[uint8]vpn.KeyMaterial // by key_id
	Primary uint8                     // transmit key_id
	Rx, Tx  time.Time
}

// DataPlane records every call the control plane makes.
type DataPlane struct {
	mu      sync.Mutex
	peers   map[uint32]*PeerState
	log     []string
	changed chan struct{}
}

// New returns an empty fake.
func New() *DataPlane {
	return &DataPlane{peers: map[uint32]*PeerState{}, changed: make(chan struct{}, 1)}
}

func (d *DataPlane) record(format string, args ...any) {
	d.log = append(d.log, fmt.Sprintf(format, args...))
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

func (d *DataPlane) AddPeer(p control.Peer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.peers[p.PeerID]; ok {
		return errors.New("controltest: peer exists")
	}
	d.peers[p.PeerID] = &PeerState{Peer: p, Keys: map[uint8]vpn.KeyMaterial{}}
	d.record("add %d", p.PeerID)
	return nil
}

func (d *DataPlane) InstallKey(id uint32, slot vpn.Slot, km *vpn.KeyMaterial) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.peers[id]
	if !ok {
		return errors.New("controltest: no such peer")
	}
	p.Keys[km.KeyID] = *km
	if slot == vpn.Primary {
		p.Primary = km.KeyID
	}
	d.record("key %d kid %d slot %d", id, km.KeyID, slot)
	return nil
}

func (d *DataPlane) SetPrimary(id uint32, kid uint8) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.peers[id]
	if !ok {
		return errors.New("controltest: no such peer")
	}
	if _, ok := p.Keys[kid]; !ok {
		return errors.New("controltest: no such key")
	}
	p.Primary = kid
	d.record("primary %d kid %d", id, kid)
	return nil
}

func (d *DataPlane) DropKey(id uint32, kid uint8) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.peers[id]
	if !ok {
		return errors.New("controltest: no such peer")
	}
	delete(p.Keys, kid)
	d.record("drop %d kid %d", id, kid)
	return nil
}

func (d *DataPlane) RemovePeer(id uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.peers[id]; !ok {
		return errors.New("controltest: no such peer")
	}
	delete(d.peers, id)
	d.record("remove %d", id)
	return nil
}

func (d *DataPlane) LastActivity(id uint32) (rx, tx time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.peers[id]; ok {
		return p.Rx, p.Tx
	}
	return
}

// Touch records data-plane activity for a peer (what a real data plane
// does when a packet authenticates or is sent).
func (d *DataPlane) Touch(id uint32, rx, tx time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.peers[id]; ok {
		if !rx.IsZero() {
			p.Rx = rx
		}
		if !tx.IsZero() {
			p.Tx = tx
		}
	}
}

// Peer returns a copy of one peer's state.
func (d *DataPlane) Peer(id uint32) (PeerState, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.peers[id]
	if !ok {
		return PeerState{}, false
	}
	c := *p
	c.Keys = map[uint8]vpn.KeyMaterial{}
	for k, v := range p.Keys {
		c.Keys[k] = v
	}
	return c, true
}

// Peers returns the ids of all peers.
func (d *DataPlane) Peers() []uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	ids := make([]uint32, 0, len(d.peers))
	for id := range d.peers {
		ids = append(ids, id)
	}
	return ids
}

// Log returns the calls made so far, one line each.
func (d *DataPlane) Log() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.log...)
}

// Wait blocks until cond holds (checked after every call) or timeout.
func (d *DataPlane) Wait(timeout time.Duration, cond func(*DataPlane) bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond(d) {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		select {
		case <-d.changed:
		case <-time.After(min(left, 100*time.Millisecond)):
		}
	}
}
