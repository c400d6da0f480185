package metrics

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	connsOpen    = desc("metrics_connections", "Connections the metrics endpoint holds open.")
	connsRefused = desc("metrics_connections_refused_total", "Connections the metrics endpoint closed on accept, by the limit they met (total, per_source).", "limit")
)

// capListener closes a connection as soon as it is accepted when the
// endpoint already holds its total, or its source's share, so one client
// holding connections open takes neither the endpoint from the others nor
// the daemon's file descriptors.
type capListener struct {
	net.Listener
	total, perSource int

	mu      sync.Mutex
	open    int
	sources map[netip.Prefix]int

	refusedTotal, refusedSource atomic.Uint64
}

func newCapListener(ln net.Listener, total, perSource int) *capListener {
	return &capListener{Listener: ln, total: total, perSource: perSource, sources: map[netip.Prefix]int{}}
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src, keyed := source(c.RemoteAddr())
		l.mu.Lock()
		switch {
		case l.open >= l.total:
			l.refusedTotal.Add(1)
		case keyed && l.sources[src] >= l.perSource:
			l.refusedSource.Add(1)
		default:
			l.open++
			if keyed {
				l.sources[src]++
			}
			l.mu.Unlock()
			return &capConn{Conn: c, l: l, src: src, keyed: keyed}, nil
		}
		l.mu.Unlock()
		c.Close()
	}
}

func (l *capListener) release(src netip.Prefix, keyed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if keyed {
		if l.sources[src]--; l.sources[src] == 0 {
			delete(l.sources, src)
		}
	}
}

// source is the client a TCP connection counts against: its IPv4 address,
// or its IPv6 /64 (one host's share of addresses). Unix socket clients
// (the ovfwd group) share only the total.
func source(a net.Addr) (netip.Prefix, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	ip := t.AddrPort().Addr().Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32), true
	}
	p, _ := ip.Prefix(64)
	return p, true
}

func (l *capListener) Describe(ch chan<- *prometheus.Desc) {
	ch <- connsOpen
	ch <- connsRefused
}

func (l *capListener) Collect(ch chan<- prometheus.Metric) {
	l.mu.Lock()
	open := l.open
	l.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(connsOpen, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(connsRefused, prometheus.CounterValue, float64(l.refusedTotal.Load()), "total")
	ch <- prometheus.MustNewConstMetric(connsRefused, prometheus.CounterValue, float64(l.refusedSource.Load()), "per_source")
}

// capConn gives its place back once, however often it is closed.
type capConn struct {
	net.Conn
	l     *capListener
	src   netip.Prefix
	keyed bool
	once  sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() { c.l.release(c.src, c.keyed) })
	return c.Conn.Close()
}
