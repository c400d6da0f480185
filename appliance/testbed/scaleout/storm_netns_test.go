package scaleout

import (
	"context"
	"fmt"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// stormClients is how many clients of a failed appliance reconnect to
// the survivor at once.
const stormClients = 1000

// TestScaleOutReconnectStorm: the clients of a failed appliance all
// handshake with the survivor at once (ovfwd's own client, as `ovfwd
// bench vpn` uses, 1,000 of them from one namespace) while the survivor
// carries its own stock client's traffic. Reported: the time until every
// moved client is established and until every one has passed an echo to
// the LAN host through its tunnel; the survivor's own client may lose
// nothing meanwhile.
func TestScaleOutReconnectStorm(t *testing.T) {
	l, _ := newLab(t, 2, 0, func(l *Lab) { l.MaxPeers, l.HandshakeRate = stormClients+16, 2000 })
	b := l.Apps[1]
	own, err := l.StartClient(0, b)
	if err != nil {
		t.Fatal(err)
	}
	waitClients(t, l, []*Client{own}, 30*time.Second, func(*Client) *Appliance { return b })
	cfgs := make([]control.ClientConfig, stormClients)
	remote := netip.AddrPortFrom(b.Outside, VPNPort).String()
	for i := range cfgs {
		path, err := pki.Client(l.PKI, fmt.Sprintf("storm%d", i), remote)
		if err != nil {
			t.Fatal(err)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if cfgs[i], err = control.ParseProfile(text); err != nil {
			t.Fatal(err)
		}
		cfgs[i].NoReconnect = true
	}
	pinger, err := l.start(l.LAN, filepath.Join(l.Dir, "ping-own.log"), "ping", "-n", "-i", "0.1", "-W", "1", own.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	clients := make([]*control.Client, len(cfgs))
	var established, echoed atomic.Int64
	var lastUp, lastEcho atomic.Int64 // ns since start
	var wg sync.WaitGroup
	var firstErr error
	var mu sync.Mutex
	sem := make(chan struct{}, 256) // handshakes in flight from the client side
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range cfgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			err := l.Clients[1].Do(func() error {
				c, err := control.Dial(ctx, cfgs[i])
				<-sem
				if err != nil {
					return err
				}
				clients[i] = c
				established.Add(1)
				lastUp.Store(int64(time.Since(start)))
				if !echoLAN(c, uint16(i)) {
					return fmt.Errorf("no echo from the LAN host through the tunnel")
				}
				echoed.Add(1)
				lastEcho.Store(int64(time.Since(start)))
				return nil
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
	took := time.Since(start)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}()
	time.Sleep(time.Second)
	pinger.Stop(syscallSIGINT, 3*time.Second)
	recv, lost := pingGaps(pinger.Log)
	st, _ := b.Status()
	peers := 0
	if st != nil && st.VPN != nil {
		peers = len(st.VPN.Peers)
	}
	t.Logf("reconnect storm: %d clients handshaking with b at once: all established after %v (%.0f handshakes/s), all passed an echo to the LAN host after %v; b's own client: %d pings answered, %d lost; b has %d peers",
		established.Load(), time.Duration(lastUp.Load()).Round(time.Millisecond), float64(established.Load())/time.Duration(lastUp.Load()).Seconds(),
		time.Duration(lastEcho.Load()).Round(time.Millisecond), recv, lost, peers)
	if firstErr != nil || echoed.Load() != stormClients {
		t.Fatalf("%d of %d clients passed traffic within %v: %v", echoed.Load(), stormClients, took.Round(time.Millisecond), firstErr)
	}
	if recv == 0 || lost != 0 {
		var drops string
		if st != nil {
			drops = fmt.Sprintf("engine drops %v, vpn drops %v", st.Drops, st.VPN.Drops)
		}
		t.Errorf("b's own client lost %d pings (%d answered) during the storm (%s):\n%s", lost, recv, drops, pinger.Tail(1000))
	}
}

// echoLAN pings the LAN host through c's tunnel and waits for the reply.
func echoLAN(c *control.Client, seq uint16) bool {
	p := c.Pushed()
	if p == nil {
		return false
	}
	req := netns.ICMPEcho(p.IPv4.Addr(), LANHost, 0x5339, seq)
	for try := 0; try < 5; try++ {
		if c.Send(req) != nil {
			time.Sleep(time.Second)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		for {
			got, err := c.Recv(ctx)
			if err != nil {
				break
			}
			if netns.IsEchoReply(got, LANHost, seq) {
				cancel()
				return true
			}
		}
		cancel()
	}
	return false
}
