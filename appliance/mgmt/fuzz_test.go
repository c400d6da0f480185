package mgmt

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// FuzzSession feeds arbitrary bytes to a connection as its commands (a
// write-permitted one, so kill, client-kill and signal reach the backend),
// then quit: the session never panics or hangs, everything it writes is
// whole CRLF-ended lines, and the backend sees only well-formed requests.
func FuzzSession(f *testing.F) {
	for _, s := range []string{"status 2\nstatus 3\nload-stats\n", "kill alice\nclient-kill 0 HALT\nsignal SIGHUP\n",
		"log 5\nstate all\nbytecount 0\nhelp\nversion\n", "\"unclosed\n\\x\n", strings.Repeat("a", 2000) + "\npid\n", "log on\nlog off\n"} {
		f.Add(s)
	}
	be := &fakeBackend{peers: []status.VPNPeer{alice()}}
	s := &Server{opt: Options{MaxClients: 1, StatusFormat: 1, Authorized: func(net.Conn) error { return nil }}, be: be,
		hist: NewHistory(), conns: map[net.Conn]bool{}}
	f.Fuzz(func(t *testing.T, in string) {
		srv, cli := net.Pipe()
		done := make(chan struct{})
		go func() { defer close(done); s.handle(srv) }()
		go func() {
			_, _ = io.WriteString(cli, in+"\nbytecount 0\nlog off\nstate off\nquit\n")
		}()
		_ = cli.SetDeadline(time.Now().Add(10 * time.Second))
		out, err := io.ReadAll(cli)
		if err != nil {
			t.Fatalf("reading the session: %v", err)
		}
		<-done
		text := string(out)
		if !strings.HasPrefix(text, greeting) || !strings.HasSuffix(text, "\r\n") {
			t.Fatalf("session output %q", text)
		}
		for _, l := range strings.SplitAfter(text, "\r\n") {
			if strings.ContainsAny(strings.TrimSuffix(l, "\r\n"), "\r\n") {
				t.Fatalf("broken line %q", l)
			}
		}
		be.mu.Lock()
		defer be.mu.Unlock()
		for _, sig := range be.signals {
			if sig != "SIGHUP" && sig != "SIGTERM" {
				t.Fatalf("signal %q reached the backend", sig)
			}
		}
		be.kills, be.cidKill, be.signals = nil, nil, nil
	})
}
