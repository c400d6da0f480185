package metrics

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// keepAlive is one client connection that sent a request and keeps the
// connection open after the answer.
type keepAlive struct {
	net.Conn
	r *bufio.Reader
}

// request sends GET path on a new connection from the loopback address
// local and reads the answer; an error means the server closed the
// connection unanswered.
func request(t *testing.T, addr, local, path string) (*keepAlive, int, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: ovfwd\r\n\r\n", path); err != nil {
		return nil, 0, err
	}
	k := &keepAlive{Conn: c, r: bufio.NewReader(c)}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return nil, 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return k, resp.StatusCode, err
}

// One source opens many keep-alive connections and leaves them idle: it
// keeps its share (perSource), the rest are closed on accept and counted,
// a scrape from another address succeeds meanwhile, and the idle ones are
// closed after the idle timeout, which gives the share back.
func TestEndpointIdleConnectionFlood(t *testing.T) {
	lim := defaultLimits
	lim.conns, lim.perSource, lim.idle = 6, 3, 3*time.Second
	srv, err := listen("tcp", "127.0.0.1:0", func() status.Snapshot { return sample() }, lim)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Addr().String()

	const flood = 20
	var held []*keepAlive
	for range flood {
		k, code, err := request(t, addr, "127.0.0.1", "/")
		if err != nil {
			continue // closed on accept
		}
		if code != http.StatusNotFound {
			t.Fatalf("GET /: status %d", code)
		}
		held = append(held, k)
	}
	if len(held) != lim.perSource {
		t.Fatalf("one source holds %d of its %d idle connections, want its share of %d", len(held), flood, lim.perSource)
	}

	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		return (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext(ctx, network, a)
	}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("a scrape from another address during the flood: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	if v := sampleValue(t, string(body), `ovfwd_metrics_connections_refused_total{limit="per_source"}`); v != flood-uint64(lim.perSource) {
		t.Errorf("refused per source: %d, want %d", v, flood-lim.perSource)
	}
	if v := sampleValue(t, string(body), `ovfwd_metrics_connections_refused_total{limit="total"}`); v != 0 {
		t.Errorf("refused over the total: %d", v)
	}
	if v := sampleValue(t, string(body), `ovfwd_metrics_connections`); v != uint64(lim.perSource)+1 {
		t.Errorf("open connections during the scrape: %d, want %d", v, lim.perSource+1)
	}

	for i, k := range held {
		_ = k.SetReadDeadline(time.Now().Add(lim.idle + 10*time.Second))
		if _, err := k.r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection %d: %v, want closed by the server after %v idle", i, err, lim.idle)
		}
	}
	// The closed ones gave their places back (the server releases a
	// place after its close, so allow it a moment).
	for i := 0; ; i++ {
		_, code, err := request(t, addr, "127.0.0.1", "/")
		if err == nil && code == http.StatusNotFound {
			break
		}
		if i == 100 {
			t.Fatalf("the flooding source cannot connect again after its idle connections closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Past the total, every source is refused, and it is counted apart.
func TestEndpointConnectionTotal(t *testing.T) {
	lim := defaultLimits
	lim.conns, lim.perSource = 2, 8
	srv, err := listen("tcp", "127.0.0.1:0", func() status.Snapshot { return sample() }, lim)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr := srv.Addr().String()
	for _, local := range []string{"127.0.0.1", "127.0.0.2"} {
		if _, _, err := request(t, addr, local, "/"); err != nil {
			t.Fatalf("connection from %s: %v", local, err)
		}
	}
	if _, _, err := request(t, addr, "127.0.0.3", "/"); err == nil {
		t.Fatal("a third connection was answered with a total of 2")
	}
	if n := srv.ln.refusedTotal.Load(); n != 1 {
		t.Errorf("refused over the total: %d, want 1", n)
	}
}
