package mgmt

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// fakeBackend is the daemon's side: one client, alice, as in the
// recordings, and a log of what was asked.
type fakeBackend struct {
	mu      sync.Mutex
	peers   []status.VPNPeer
	kills   []string
	cidKill []string
	signals []string
}

func (b *fakeBackend) Snapshot() status.Snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return status.Snapshot{Version: "v9", VPN: &status.VPN{Peers: slices.Clone(b.peers)}}
}

func (b *fakeBackend) Kill(target string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.kills = append(b.kills, target)
	n := 0
	for _, p := range b.peers {
		if p.Name == target || p.Real == target {
			n++
		}
	}
	if n == 0 {
		return 0, errors.New("no such client")
	}
	return n, nil
}

func (b *fakeBackend) KillClient(cid uint64, msg string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cidKill = append(b.cidKill, msg)
	for _, p := range b.peers {
		if p.ClientID == cid {
			return true
		}
	}
	return false
}

func (b *fakeBackend) Signal(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.signals = append(b.signals, name)
	return nil
}

func alice() status.VPNPeer {
	return status.VPNPeer{Name: "alice", Real: "198.18.150.1:53541", Addrs: []string{"198.18.152.2", "2001:db8:152::1000"},
		LinkRx: 2575, LinkTx: 2556, Since: time.Unix(1796686257, 0), Username: "alice", Cipher: "AES-256-GCM", ClientID: 0}
}

func start(t *testing.T, o Options, be Backend) *Server {
	t.Helper()
	if o.Socket == "" && !o.Listen.IsValid() {
		o.Socket = filepath.Join(t.TempDir(), "mgmt.sock")
	}
	s, err := Listen(o, be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is a test's management connection.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, network, addr string) *client {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) line() string {
	c.t.Helper()
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, l)
	}
	return l
}

// do sends cmd and reads its answer: one line, or through END for the
// multi-line commands.
func (c *client) do(cmd string) string {
	c.t.Helper()
	if _, err := c.c.Write([]byte(cmd + "\n")); err != nil {
		c.t.Fatal(err)
	}
	var b strings.Builder
	for {
		l := c.line()
		b.WriteString(l)
		if !multiLine(cmd, l) {
			return b.String()
		}
		if l == "END\r\n" || strings.HasPrefix(l, "ERROR") {
			return b.String()
		}
	}
}

func multiLine(cmd, first string) bool {
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return false
	}
	switch f[0] {
	case "version", "help", "status":
		return true
	case "state", "log":
		return len(f) == 1 || f[1] != "on" && f[1] != "off"
	}
	return false
}

// transcript reads testdata/openvpn-2.6.14/transcript.txt: what openvpn
// 2.6.14 answered each command with, one client (alice) connected.
func transcript(t *testing.T) map[string]string {
	b, err := os.ReadFile(filepath.Join("testdata", "openvpn-2.6.14", "transcript.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var cmd string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if c, ok := strings.CutPrefix(l, "=== "); ok {
			cmd = strings.TrimSuffix(c, "\n")
			continue
		}
		out[cmd] += l
	}
	return out
}

// TestLikeOpenVPN: ovfwd answers each command as openvpn 2.6.14 did in
// the recorded session, byte for byte where the answer does not depend on
// the process (pid, title, times: checked by shape).
func TestLikeOpenVPN(t *testing.T) {
	be := &fakeBackend{peers: []status.VPNPeer{alice()}}
	s := start(t, Options{Authorized: func(net.Conn) error { return nil }, Version: "v9", StatusFormat: 2}, be)
	want := transcript(t)
	c := dial(t, "unix", s.opt.Socket)
	if g := c.line(); g != want["greeting"] {
		t.Errorf("greeting %q, want %q", g, want["greeting"])
	}
	for _, cmd := range []string{"kill bob", "kill 1.2.3.4:5", "client-kill 99", "client-kill x", "signal SIGFOO",
		"bytecount 0", "log on", "bogus", "kill", "status 4", "load-stats"} {
		w := want[cmd]
		if cmd == "load-stats" {
			w = "SUCCESS: nclients=1,bytesin=2575,bytesout=2556\r\n" // alice's figures here
		}
		if strings.Contains(w, ">LOG:") { // a real-time line that came after: not the answer
			w = w[strings.Index(w, "SUCCESS"):]
		}
		if got := c.do(cmd); got != w {
			t.Errorf("%s: %q, want %q", cmd, got, w)
		}
	}
	if got := c.do("log off"); got != "SUCCESS: real-time log notification set to OFF\r\n" {
		t.Errorf("log off: %q", got)
	}
	if got := c.do("pid"); got != "SUCCESS: pid="+strconv.Itoa(os.Getpid())+"\r\n" {
		t.Errorf("pid: %q", got)
	}
	ver := c.do("version")
	if !strings.HasPrefix(ver, "OpenVPN Version: OpenVPN 2.6 (ovfwd v9)") || !strings.HasSuffix(ver, "\r\nManagement Version: 5\r\nEND\r\n") {
		t.Errorf("version: %q", ver)
	}
	// The fourth word is what tools read as openvpn's version.
	if f := strings.Split(ver, " "); f[3] != "2.6" {
		t.Errorf("version's fourth word %q", f[3])
	}
	help := c.do("help")
	for _, l := range strings.Split(strings.TrimSuffix(help, "\r\n"), "\r\n")[2:] {
		if l != "END" && !strings.Contains(want["help"], l+"\r\n") && !strings.HasPrefix(l, "nclients") &&
			!strings.HasPrefix(l, "version") && !strings.Contains(l, "SIGHUP|SIGTERM.") {
			t.Errorf("help line %q is not openvpn's", l)
		}
	}
	// "status" without a version is StatusFormat's (openvpn: status-version).
	if st := c.do("status"); !strings.HasPrefix(st, "TITLE,OpenVPN 2.6 (ovfwd v9)") ||
		!strings.Contains(st, "\r\nCLIENT_LIST,alice,198.18.150.1:53541,198.18.152.2,2001:db8:152::1000,2575,2556,") {
		t.Errorf("status: %q", st)
	}
	if st := c.do("status 3"); !strings.Contains(st, "\r\nCLIENT_LIST\talice\t") {
		t.Errorf("status 3: %q", st)
	}
	if got := c.do("kill alice"); got != "SUCCESS: common name 'alice' found, 1 client(s) killed\r\n" {
		t.Errorf("kill alice: %q", got)
	}
	if got := c.do("kill 198.18.150.1:53541"); got != "SUCCESS: 1 client(s) at address 198.18.150.1:53541 killed\r\n" {
		t.Errorf("kill by address: %q", got)
	}
	if got := c.do(`client-kill 0 "HALT"`); got != "SUCCESS: client-kill command succeeded\r\n" {
		t.Errorf("client-kill: %q", got)
	}
	if got := c.do("signal SIGHUP"); got != "SUCCESS: signal SIGHUP thrown\r\n" {
		t.Errorf("signal: %q", got)
	}
	be.mu.Lock()
	if !slices.Equal(be.kills, []string{"bob", "1.2.3.4:5", "alice", "198.18.150.1:53541"}) ||
		!slices.Equal(be.cidKill, []string{"RESTART", "HALT"}) || !slices.Equal(be.signals, []string{"SIGHUP"}) {
		t.Errorf("backend saw kills %q, client-kills %q, signals %q", be.kills, be.cidKill, be.signals)
	}
	be.mu.Unlock()
	if _, err := c.c.Write([]byte("quit\n")); err != nil {
		t.Fatal(err)
	}
	if l, err := c.r.ReadString('\n'); err == nil {
		t.Errorf("after quit: %q", l)
	}
}

// TestStateAndLog: the state and log histories in openvpn's line formats,
// and their real-time notifications.
func TestStateAndLog(t *testing.T) {
	h := NewHistory()
	h.SetState(time.Unix(1796686255, 0), "CONNECTED", "SUCCESS", "198.18.152.1", "2001:db8:152::1")
	log := slog.New(h.Handler(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	log.Warn("vpn peer up", "name", "alice")
	s := start(t, Options{History: h}, &fakeBackend{})
	c := dial(t, "unix", s.opt.Socket)
	c.line()
	// openvpn 2.6.14's answer to "state" as a server (transcript).
	if got := c.do("state"); got != "1796686255,CONNECTED,SUCCESS,198.18.152.1,,,,,2001:db8:152::1\r\nEND\r\n" {
		t.Errorf("state: %q", got)
	}
	got := c.do("log all")
	if !regexpMatch(`^\d+,W,vpn peer up name=alice\r\nEND\r\n$`, got) {
		t.Errorf("log all: %q", got)
	}
	c.do("log on")
	c.do("state on")
	log.Error("multi\nline", "err", "x")
	if l := c.line(); !regexpMatch(`^>LOG:\d+,N,multi\\nline err=x\r\n$`, l) {
		t.Errorf("real-time log: %q", l)
	}
	h.SetState(time.Unix(5, 0), "EXITING", "SIGTERM", "", "")
	if l := c.line(); l != ">STATE:5,EXITING,SIGTERM,,,,,\r\n" {
		t.Errorf("real-time state: %q", l)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestReadOnly: a unix peer that is not the daemon's user or group reads
// status but its kill, client-kill and signal are refused before the
// backend hears of them.
func TestReadOnly(t *testing.T) {
	be := &fakeBackend{peers: []status.VPNPeer{alice()}}
	s := start(t, Options{Authorized: func(net.Conn) error { return errors.New("no") }}, be)
	c := dial(t, "unix", s.opt.Socket)
	c.line()
	for _, cmd := range []string{"kill alice", "client-kill 0", "signal SIGTERM"} {
		if got := c.do(cmd); !strings.HasPrefix(got, "ERROR: permission denied") {
			t.Errorf("%s: %q", cmd, got)
		}
	}
	if got := c.do("status 2"); !strings.Contains(got, "CLIENT_LIST,alice") {
		t.Errorf("status refused to a read-only peer: %q", got)
	}
	if len(be.kills)+len(be.cidKill)+len(be.signals) != 0 || s.Stats().Denied != 3 {
		t.Errorf("backend called: %v %v %v; denied %d", be.kills, be.cidKill, be.signals, s.Stats().Denied)
	}
}

// TestSlowReader: a client that turned the log on and reads nothing never
// holds up the logging goroutine; what it has no room for is dropped and
// counted, and other clients are served meanwhile.
func TestSlowReader(t *testing.T) {
	h := NewHistory()
	log := slog.New(h.Handler(slog.NewTextHandler(discard{}, nil)))
	var serverLog syncBuffer
	s := start(t, Options{History: h, Log: slog.New(slog.NewTextHandler(&serverLog, nil))}, &fakeBackend{peers: []status.VPNPeer{alice()}})
	slow := dial(t, "unix", s.opt.Socket)
	slow.line()
	slow.do("log on")
	// Shrink the slow client's socket buffer so the outbox fills.
	if uc, ok := slow.c.(*net.UnixConn); ok {
		_ = uc.SetReadBuffer(4096)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		line := strings.Repeat("x", 1000)
		for i := 0; i < 5000; i++ { // 5 MB of log lines
			log.Info(line)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("logging blocked on a client that does not read")
	}
	if s.Stats().Dropped == 0 {
		t.Error("nothing dropped for a client that reads nothing")
	}
	other := dial(t, "unix", s.opt.Socket)
	other.line()
	if got := other.do("load-stats"); !strings.HasPrefix(got, "SUCCESS: nclients=1") {
		t.Errorf("another client: %q", got)
	}
	// The slow client leaving is logged with what it lost.
	slow.c.Close()
	for i := 0; i < 500 && !strings.Contains(serverLog.String(), "notifications dropped"); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(serverLog.String(), `notifications dropped" dropped=`) {
		t.Errorf("no log line for the slow client's losses:\n%s", serverLog.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLimits: connections past MaxClients are refused; a line longer than
// maxLine is refused and the connection goes on.
func TestLimits(t *testing.T) {
	s := start(t, Options{MaxClients: 2}, &fakeBackend{})
	a, b := dial(t, "unix", s.opt.Socket), dial(t, "unix", s.opt.Socket)
	a.line()
	b.line()
	c := dial(t, "unix", s.opt.Socket)
	if l := c.line(); l != "ERROR: too many management connections\r\n" {
		t.Errorf("third connection: %q", l)
	}
	if got := a.do(strings.Repeat("a", 5000)); got != "ERROR: command line too long\r\n" {
		t.Errorf("long line: %q", got)
	}
	if got := a.do("pid"); !strings.HasPrefix(got, "SUCCESS: pid=") {
		t.Errorf("after a long line: %q", got)
	}
	b.c.Close()
	for i := 0; i < 100 && s.active.Load() > 1; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	d := dial(t, "unix", s.opt.Socket)
	if l := d.line(); l != greeting {
		t.Errorf("after one left: %q", l)
	}
	if s.Stats().Refused != 1 {
		t.Errorf("refused %d", s.Stats().Refused)
	}
	if _, err := Listen(Options{Socket: s.opt.Socket}, &fakeBackend{}); err == nil {
		t.Error("a second server took over a live socket")
	}
}

// TestPassword: TCP asks for the password first (openvpn's prompt, no
// newline), three wrong ones close the connection, the right one lets
// write commands through.
func TestPassword(t *testing.T) {
	be := &fakeBackend{peers: []status.VPNPeer{alice()}}
	s := start(t, Options{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Password: "sesame"}, be)
	c := dial(t, "tcp", s.Addr().String())
	prompt := make([]byte, len("ENTER PASSWORD:"))
	for i := 0; i < passwordTries; i++ {
		if _, err := ioReadFull(c.r, prompt); err != nil || string(prompt) != "ENTER PASSWORD:" {
			t.Fatalf("prompt %q %v", prompt, err)
		}
		if got := c.do("wrong"); got != "ERROR: bad password\r\n" {
			t.Fatalf("bad password: %q", got)
		}
	}
	if _, err := c.r.ReadString('\n'); err == nil {
		t.Error("connection open after three bad passwords")
	}
	c = dial(t, "tcp", s.Addr().String())
	ioReadFull(c.r, prompt)
	if got := c.do("sesame"); got != "SUCCESS: password is correct\r\n" {
		t.Fatalf("good password: %q", got)
	}
	if l := c.line(); l != greeting {
		t.Errorf("greeting %q", l)
	}
	if got := c.do("kill alice"); !strings.HasPrefix(got, "SUCCESS") {
		t.Errorf("kill over TCP: %q", got)
	}
	if s.Stats().BadPassword != 3 {
		t.Errorf("bad passwords %d", s.Stats().BadPassword)
	}
	if _, err := Listen(Options{Listen: netip.MustParseAddrPort("127.0.0.1:0")}, be); err == nil {
		t.Error("TCP without a password started")
	}
}

func ioReadFull(r *bufio.Reader, b []byte) (int, error) {
	for i := range b {
		c, err := r.ReadByte()
		if err != nil {
			return i, err
		}
		b[i] = c
	}
	return len(b), nil
}

// TestBytecount: >BYTECOUNT_CLI:CID,IN,OUT for each client every N
// seconds, until "bytecount 0".
func TestBytecount(t *testing.T) {
	p2 := alice()
	p2.Name, p2.ClientID, p2.LinkRx, p2.LinkTx = "bob", 7, 10, 20
	be := &fakeBackend{peers: []status.VPNPeer{alice(), p2}}
	s := start(t, Options{}, be)
	c := dial(t, "unix", s.opt.Socket)
	c.line()
	if got := c.do("bytecount 1"); got != "SUCCESS: bytecount interval changed\r\n" {
		t.Fatalf("bytecount: %q", got)
	}
	if a, b := c.line(), c.line(); a != ">BYTECOUNT_CLI:0,2575,2556\r\n" || b != ">BYTECOUNT_CLI:7,10,20\r\n" {
		t.Errorf("bytecounts %q %q", a, b)
	}
	c.do("bytecount 0")
	_ = c.c.SetReadDeadline(time.Now().Add(2500 * time.Millisecond))
	for {
		l, err := c.r.ReadString('\n')
		if err != nil {
			break
		}
		if strings.HasPrefix(l, ">BYTECOUNT_CLI") && !strings.HasPrefix(l, ">BYTECOUNT_CLI:7") {
			// one tick may have been queued before the answer; none after
			continue
		}
		t.Errorf("after bytecount 0: %q", l)
	}
}

func TestParseLine(t *testing.T) {
	for line, want := range map[string][]string{
		"status 2":                 {"status", "2"},
		"  kill   alice  ":         {"kill", "alice"},
		`client-kill 3 "HALT now"`: {"client-kill", "3", "HALT now"},
		`kill 'a b\c'`:             {"kill", `a b\c`},
		`kill a\ b`:                {"kill", "a b"},
		`kill "say \"hi\""`:        {"kill", `say "hi"`},
		"kill a ; comment":         {"kill", "a"},
		"# all comment":            nil,
		"":                         nil,
		`kill ""`:                  {"kill", ""},
		"a\x00b":                   {"a"},
	} {
		got, err := ParseLine(line)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %q %v, want %q", line, got, err, want)
		}
	}
	for _, bad := range []string{`kill "open`, `kill 'open`, `kill a\b`, "kill " + strings.Repeat("x", 300)} {
		if got, err := ParseLine(bad); err == nil {
			t.Errorf("%q accepted: %q", bad, got)
		}
	}
	many, _ := ParseLine(strings.Repeat("a ", 40))
	if len(many) != maxParams {
		t.Errorf("%d parameters", len(many))
	}
}

// FuzzParseLine: any line parses or fails without panicking, within the
// bounds, and what parses survives quoting: each parameter, written
// double-quoted with its backslashes and quotes escaped, parses back to
// itself.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{"status 2", `client-kill 3 "HALT now"`, `kill 'a b\c'`, `a\ b "c\"d" ; x`, "\x00", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, err := ParseLine(line)
		if err != nil {
			return
		}
		if len(p) > maxParams {
			t.Fatalf("%d parameters", len(p))
		}
		var q []string
		for _, s := range p {
			if len(s) >= maxParamLen || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("parameter %q out of bounds", s)
			}
			q = append(q, `"`+strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s)+`"`)
		}
		back, err := ParseLine(strings.Join(q, " "))
		if err != nil || !slices.Equal(back, p) {
			t.Fatalf("%q -> %q -> %q %v", line, p, back, err)
		}
	})
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
