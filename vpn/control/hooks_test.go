package control_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/hooks"
)

// TestClientConnectFile: what client-connect writes in its file reaches
// the client (ifconfig-push, ifconfig-ipv6-push, push) and the data plane
// (iroute); "disable" and a failing command refuse with AUTH_FAILED.
func TestClientConnectFile(t *testing.T) {
	dir := newPKI(t)
	script := filepath.Join(t.TempDir(), "cc")
	body := `#!/bin/sh
case $common_name in
fixed) printf '%s\n' 'ifconfig-push 198.18.71.77 255.255.255.0' 'ifconfig-ipv6-push 2001:db8:71::77/64' \
	'push "route 198.18.73.0 255.255.255.0"' 'iroute 198.18.74.0 255.255.255.0' > "$1" ;;
off) echo disable > "$1" ;;
fail) exit 1 ;;
esac
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	h := &hooks.Hooks{ClientConnect: []string{script}, Timeout: 10 * time.Second, Runner: &hooks.Runner{Concurrency: 4}}
	t.Cleanup(h.Close)
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) { c.Hooks = h })

	c := dial(t, clientProfile(t, dir, "fixed", e.addr()))
	p := c.Pushed()
	if p.IPv4 != netip.MustParsePrefix("198.18.71.77/24") || p.IPv6.Addr() != netip.MustParseAddr("2001:db8:71::77") ||
		!slices.Contains(p.Routes, netip.MustParsePrefix("198.18.73.0/24")) {
		t.Errorf("pushed %+v", p)
	}
	st, ok := e.dp.Peer(p.PeerID)
	if !ok || !slices.Equal(st.Peer.IRoutes, []netip.Prefix{netip.MustParsePrefix("198.18.74.0/24")}) ||
		st.Peer.VPNIPv4 != netip.MustParseAddr("198.18.71.77") || st.Peer.Client.CommonName != "fixed" {
		t.Errorf("data plane peer %+v", st.Peer)
	}

	for _, name := range []string{"off", "fail"} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := control.Dial(ctx, clientProfile(t, dir, name, e.addr()))
		cancel()
		if err == nil || !strings.Contains(err.Error(), "AUTH_FAILED") {
			t.Errorf("%s: %v, want AUTH_FAILED", name, err)
		}
	}
	if n := h.Connect.Failed.Load(); n != 1 {
		t.Errorf("%d failed client-connects counted, want 1", n)
	}
}
