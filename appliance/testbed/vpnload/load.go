package vpnload

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// clientConfigs issues n client certificates in the PKI at dir and parses
// their profiles.
func clientConfigs(dir string, n int) ([]control.ClientConfig, error) {
	remote := fmt.Sprintf("%s:%d", serverIP0, vpnPort)
	cfgs := make([]control.ClientConfig, n)
	for i := range cfgs {
		path, err := pki.Client(dir, fmt.Sprintf("load%d", i), remote)
		if err != nil {
			return nil, err
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if cfgs[i], err = control.ParseProfile(text); err != nil {
			return nil, err
		}
		_ = os.Remove(filepath.Clean(path))
	}
	return cfgs, nil
}

// dialAll connects every client from namespace ns at once (at most
// parallel handshakes in flight) and returns those that connected, in
// config order (nil for failures), and the first error.
func dialAll(ctx context.Context, ns *netns.NS, cfgs []control.ClientConfig, parallel int) ([]*control.Client, error) {
	clients := make([]*control.Client, len(cfgs))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	for i := range cfgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// Dial opens its socket on the calling thread, which Do has
			// moved into ns; the socket stays there.
			err := ns.Do(func() error {
				c, err := control.Dial(ctx, cfgs[i])
				clients[i] = c
				return err
			})
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("client %d: %w", i, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return clients, firstErr
}

func closeAll(clients []*control.Client) {
	var wg sync.WaitGroup
	for _, c := range clients {
		if c != nil {
			wg.Add(1)
			go func() { defer wg.Done(); c.Close() }()
		}
	}
	wg.Wait()
}

// udpPacket is an IPv4/UDP packet from src to dst with payload bytes of
// payload (UDP checksum 0: none, allowed for IPv4).
func udpPacket(src, dst netip.Addr, sport, dport uint16, payload int) []byte {
	p := make([]byte, 28+payload)
	p[0], p[8], p[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	s4, d4 := src.As4(), dst.As4()
	copy(p[12:], s4[:])
	copy(p[16:], d4[:])
	binary.BigEndian.PutUint16(p[10:], ^netns.Checksum(p[:20]))
	binary.BigEndian.PutUint16(p[20:], sport)
	binary.BigEndian.PutUint16(p[22:], dport)
	binary.BigEndian.PutUint16(p[24:], uint16(8+payload))
	for i := 28; i < len(p); i++ {
		p[i] = byte(i)
	}
	return p
}

// sendBatch is how many packets one unpaced sendmmsg carries.
const sendBatch = 32

// offer sends UDP packets of payload bytes through every client until
// stop, at most perClientPPS each (0: as fast as possible), and returns
// how many were sent and how many Send refused.
func offer(clients []*control.Client, payload, perClientPPS int, d time.Duration) (sent, failed uint64) {
	var s, f atomic.Uint64
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	dst := netip.MustParseAddr(sinkDst)
	for i, c := range clients {
		if c == nil || c.Pushed() == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pkt := udpPacket(c.Pushed().IPv4.Addr(), dst, uint16(10000+i), 9, payload)
			var interval time.Duration
			if perClientPPS > 0 {
				interval = time.Second / time.Duration(perClientPPS)
			}
			next := time.Now()
			var n, bad uint64
			if interval == 0 {
				// Unpaced: sendmmsg batches keep the generator's per-packet
				// cost near the cost of sealing.
				batch := make([][]byte, sendBatch)
				for j := range batch {
					batch[j] = pkt
				}
				b := c.NewBatcher(sendBatch, len(pkt))
				for !time.Now().After(deadline) {
					k, err := b.Send(batch)
					n += uint64(k)
					if err != nil {
						bad++
					}
				}
				s.Add(n)
				f.Add(bad)
				return
			}
			for {
				// Check the clock once per 32 packets.
				if n%32 == 0 && time.Now().After(deadline) {
					break
				}
				if interval > 0 {
					next = next.Add(interval)
					if w := time.Until(next); w > 0 {
						time.Sleep(w)
					}
				}
				if c.Send(pkt) != nil {
					bad++
				}
				n++
			}
			s.Add(n - bad)
			f.Add(bad)
		}()
	}
	wg.Wait()
	return s.Load(), f.Load()
}
