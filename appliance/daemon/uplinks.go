package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/vpn/control"
)

// Site-to-site uplinks ([[vpn.client]]): ovfwd as the OpenVPN client of
// another server.
//
// Done: each uplink is dialled (its remote resolved at every attempt, so
// a DNS change is followed), redialled with backoff until shutdown when
// the first connection fails, and kept connected by the client's own
// ping-restart and reconnect logic; connection state and the pushed
// addresses are logged.
//
// Not done: the uplink carries no forwarded traffic yet. Installing the
// pushed address as a local address and [[vpn.client]].routes as FIB
// routes needs an engine next hop that hands packets to a Go-side client
// (the engine's tunnel next hop only reaches server-role peers), and
// decrypted packets would need a way back into a worker. Until then
// received packets are counted and dropped, and the routes are not
// installed (logged at start).

const (
	uplinkDialTimeout = 30 * time.Second
	uplinkBackoffMin  = time.Second
	uplinkBackoffMax  = 30 * time.Second
)

// uplink is one [[vpn.client]] and its connection.
type uplink struct {
	cfg  config.VPNClient
	log  *slog.Logger
	dial func(context.Context, control.ClientConfig) (*control.Client, error)

	mu       sync.Mutex
	client   *control.Client // nil until the first successful dial
	rxDrops  atomic.Uint64   // decrypted packets with nowhere to go (no data path yet)
	attempts atomic.Uint64
}

// uplinks runs every configured uplink until stop is closed.
type uplinks struct {
	list []*uplink
	stop chan struct{}
	wg   sync.WaitGroup
}

func startUplinks(cfgs []config.VPNClient, log *slog.Logger) *uplinks {
	u := &uplinks{stop: make(chan struct{})}
	for _, c := range cfgs {
		up := &uplink{cfg: c, log: log.With("uplink", c.Name), dial: control.Dial}
		up.log.Warn("uplink forwards no traffic yet: its routes are not installed", "routes", c.Routes)
		u.list = append(u.list, up)
		u.wg.Add(1)
		go func() { defer u.wg.Done(); up.run(u.stop) }()
	}
	return u
}

// close stops the dial loops and closes the connected clients.
func (u *uplinks) close() {
	close(u.stop)
	u.wg.Wait()
	for _, up := range u.list {
		up.mu.Lock()
		if up.client != nil {
			_ = up.client.Close()
		}
		up.mu.Unlock()
	}
}

// run dials until connected or stopped. Once connected the client
// reconnects by itself; run returns.
func (up *uplink) run(stop <-chan struct{}) {
	backoff := uplinkBackoffMin
	for {
		c, err := up.connect(stop)
		if err == nil {
			up.mu.Lock()
			select {
			case <-stop:
				_ = c.Close() // shutdown raced the dial
			default:
				up.client = c
			}
			up.mu.Unlock()
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

func (up *uplink) connect(stop <-chan struct{}) (*control.Client, error) {
	up.attempts.Add(1)
	ua, err := net.ResolveUDPAddr("udp", up.cfg.Remote)
	if err != nil {
		return nil, err
	}
	cc, err := control.ClientConfigFromFiles(ua.AddrPort(), up.cfg.CA, up.cfg.Cert, up.cfg.Key, up.cfg.TLSCrypt)
	if err != nil {
		return nil, err
	}
	cc.Receive = func([]byte) { up.rxDrops.Add(1) }
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
		return nil, err
	}
	p := c.Pushed()
	up.log.Info("uplink connected", "remote", ua.AddrPort(), "v4", p.IPv4, "v6", p.IPv6, "pushed_routes", p.Routes)
	return c, nil
}

// connected reports whether the uplink has a live tunnel, and what the
// server pushed.
func (up *uplink) connected() (*control.Pushed, bool) {
	up.mu.Lock()
	c := up.client
	up.mu.Unlock()
	if c == nil || !c.Connected() {
		return nil, false
	}
	return c.Pushed(), true
}
