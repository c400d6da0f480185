package monitor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// tag names this package's namespaces.
const tag = "mon"

// The TCP management interface, in the appliance namespace.
const (
	mgmtTCP      = "127.0.0.1:7505"
	mgmtPassword = "sesame"
)

// lab is ovfwd with the management interface and a status file, and two
// stock clients, alice and bob, that have sent traffic.
type lab struct {
	*vpne2e.Lab
	srv        *vpne2e.Server
	bin        string
	opts       vpne2e.ServerOptions
	mgmt, file string
	clients    []*vpne2e.Client
}

func setup(t *testing.T, tools ...string) *lab {
	t.Helper()
	nstest.RequireRoot(t)
	for _, tool := range append([]string{"openvpn", "ping"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/install-deps installs it)", tool)
		}
	}
	bin := nstest.BuildOvfwd(t)
	dir := unittest.TempDir(t, unittest.Load(t))
	l, err := vpne2e.NewLab(tag, dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	l.Logf = t.Logf
	t.Cleanup(func() {
		l.Close()
		if t.Failed() {
			for _, p := range []string{"ovfwd.log", "client0.log", "client1.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, p))
				t.Logf("--- %s (end):\n%s", p, tail(string(b), 5000))
			}
		}
	})
	m := &lab{Lab: l, mgmt: filepath.Join(dir, "run", "management.sock"), file: filepath.Join(dir, "run", "openvpn-status.log")}
	pw := filepath.Join(dir, "management.pw")
	if err := os.WriteFile(pw, []byte(mgmtPassword+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.bin = bin
	m.opts = vpne2e.ServerOptions{
		Ciphers: []string{"AES-256-GCM"},
		// Every login is accepted: the username shows in the status.
		VPN:    `auth_user_pass_verify = ["/bin/true"]`,
		Status: fmt.Sprintf("file = %q\nfile_interval = \"1s\"\nfile_version = 2\n", m.file),
		Tail:   fmt.Sprintf("[management]\nsocket = %q\nlisten = %q\npassword_file = %q\n", m.mgmt, mgmtTCP, pw),
	}
	if m.srv, err = l.StartOvfwd(bin, m.opts); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"alice", "bob"} {
		up := filepath.Join(dir, name+".up")
		if err := os.WriteFile(up, []byte("u-"+name+"\nsecret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		profile, err := l.NewProfile(i, pki.Profile{Name: name, Extra: []string{"auth-user-pass " + up}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := l.StartClient(i, profile)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitUp(45 * time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := c.NS.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", vpne2e.LANHost4.String()); err != nil {
			t.Fatalf("%s cannot reach the LAN: %v", name, err)
		}
		m.clients = append(m.clients, c)
	}
	return m
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func waitCond(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return cond()
}

func (m *lab) snapshot(t *testing.T) *status.Snapshot {
	t.Helper()
	s, err := status.Fetch(m.srv.Status, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (m *lab) log() string { b, _ := os.ReadFile(m.srv.Log); return string(b) }

// peerByName is the snapshot's client with common name cn.
func peerByName(s *status.Snapshot, cn string) *status.VPNPeer {
	for i := range s.VPN.Peers {
		if s.VPN.Peers[i].Name == cn {
			return &s.VPN.Peers[i]
		}
	}
	return nil
}

// TestThirdPartyClients: with alice and bob connected through ovfwd,
// Debian's Go management library reads the pid, the state, status 3 and
// >BYTECOUNT_CLI events for both, kills bob by client id (bob's stock
// client is told to restart and comes back with a new id) and sends
// SIGHUP (ovfwd reloads); then collectd's openvpn plugin reads the status
// file in versions 1, 2 and 3 and reports each client's traffic.
func TestThirdPartyClients(t *testing.T) {
	if sock := os.Getenv(readOnlyHelperEnv); sock != "" {
		readOnlyHelper(sock)
		return
	}
	m := setup(t, "collectd", "go", "setpriv")
	t.Run("status file", func(t *testing.T) { m.checkStatusFile(t) })
	t.Run("read-only", func(t *testing.T) { m.readOnly(t) })
	t.Run("telnet-openvpn", func(t *testing.T) { m.npm(t) })
	t.Run("go-openvpn-mgmt", func(t *testing.T) { m.goMgmt(t) })
	for v := 1; v <= 3; v++ {
		t.Run(fmt.Sprintf("collectd v%d", v), func(t *testing.T) { m.collectd(t, v) })
	}
	t.Run("like openvpn", func(t *testing.T) { m.compareWithOpenVPN(t) })
}

// checkStatusFile: the file (version 2) lists both clients with the
// snapshot's values, openvpn's column by column.
func (m *lab) checkStatusFile(t *testing.T) {
	// Both clients, and the file written after their pings (it is
	// rewritten every second): three pings and their replies at least,
	// 84 bytes each in IPv4 and 24 of data channel overhead.
	const pings = 3 * (84 + 24)
	var text string
	traffic := regexp.MustCompile(`(?m)^CLIENT_LIST,[^,]*,[^,]*,[^,]*,[^,]*,(\d{3,}),(\d{3,}),`)
	ok := waitCond(5*time.Second, func() bool {
		b, _ := os.ReadFile(m.file)
		text = string(b)
		n := 0
		for _, f := range traffic.FindAllStringSubmatch(text, -1) {
			rx, _ := strconv.Atoi(f[1])
			tx, _ := strconv.Atoi(f[2])
			if rx >= pings && tx >= pings {
				n++
			}
		}
		return n == 2
	})
	if !ok {
		t.Fatalf("status file without both clients' traffic:\n%s", text)
	}
	snap := m.snapshot(t)
	for _, c := range m.clients {
		cn := strings.TrimSuffix(filepath.Base(c.Profile), ".ovpn")
		p := peerByName(snap, cn)
		if p == nil {
			t.Fatalf("%s not in the snapshot", cn)
		}
		re := regexp.MustCompile(`(?m)^CLIENT_LIST,` + cn + `,([^,]*),([^,]*),([^,]*),(\d+),(\d+),([^,]*),(\d+),([^,]*),(\d+),(\d+),([^,]*)$`)
		f := re.FindStringSubmatch(text)
		if f == nil {
			t.Fatalf("no CLIENT_LIST line for %s:\n%s", cn, text)
		}
		want := []string{status.RealAddress(p.Real), c.V4.String(), c.V6.String()}
		if f[1] != want[0] || f[2] != want[1] || f[3] != want[2] || !strings.HasPrefix(f[1], vpne2e.ClientAddr(c.Index).String()+":") {
			t.Errorf("%s: addresses %q, want %q (client at %v)", cn, f[1:4], want, vpne2e.ClientAddr(c.Index))
		}
		rx, _ := strconv.ParseUint(f[4], 10, 64)
		tx, _ := strconv.ParseUint(f[5], 10, 64)
		if rx < pings || tx < pings {
			t.Errorf("%s: bytes received %d, sent %d", cn, rx, tx)
		}
		if f[7] != strconv.FormatInt(p.Since.Unix(), 10) || f[8] != "u-"+cn || p.Username != f[8] || f[9] != strconv.FormatUint(p.ClientID, 10) ||
			f[10] != strconv.FormatUint(uint64(p.PeerID), 10) || f[11] != "AES-256-GCM" {
			t.Errorf("%s: since/user/cid/peer/cipher %q, snapshot %+v", cn, f[7:], p)
		}
		if !strings.Contains(text, "\nROUTING_TABLE,"+c.V4.String()+","+cn+","+f[1]+",") ||
			!strings.Contains(text, "\nROUTING_TABLE,"+c.V6.String()+","+cn+","+f[1]+",") {
			t.Errorf("%s: routing table lacks its addresses:\n%s", cn, text)
		}
	}
	if snap.Monitoring["status_file_writes"] == 0 {
		t.Errorf("status shows no status file writes: %v", snap.Monitoring)
	}
	if !strings.HasPrefix(text, "TITLE,OpenVPN 2.6 (ovfwd ") || !strings.HasSuffix(text, "\nGLOBAL_STATS,dco_enabled,0\nEND\n") {
		t.Errorf("status file shape:\n%s", text)
	}
}

// goMgmt runs testdata/gomgmt, built against Debian's library.
func (m *lab) goMgmt(t *testing.T) {
	const lib = "/usr/share/gocode/src/github.com/apparentlymart/go-openvpn-mgmt/openvpn"
	if _, err := os.Stat(lib); err != nil {
		t.Fatalf("Debian's golang-github-apparentlymart-go-openvpn-mgmt-dev is not installed (.ci/install-deps): %v", err)
	}
	prog := filepath.Join(t.TempDir(), "gomgmt")
	build := exec.Command("go", "build", "-o", prog, ".")
	build.Dir = filepath.Join("testdata", "gomgmt")
	build.Env = append(os.Environ(), "GO111MODULE=off", "GOPATH=/usr/share/gocode", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building gomgmt against /usr/share/gocode: %v\n%s", err, out)
	}
	before := m.snapshot(t)
	bob := peerByName(before, "bob")
	reloads := strings.Count(m.log(), `msg=reloaded`)
	out, err := m.App.Run(prog, m.mgmt, "2", "bob")
	t.Logf("gomgmt:\n%s", out)
	if err != nil {
		t.Fatalf("gomgmt: %v", err)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		lines[f[0]] = append(lines[f[0]], strings.Join(f[1:], " "))
	}
	if got := lines["pid"]; len(got) != 1 || got[0] != strconv.Itoa(before.PID) {
		t.Errorf("pid %q, want %d", got, before.PID)
	}
	if got := lines["state"]; len(got) != 1 || got[0] != "CONNECTED SUCCESS "+vpne2e.Pool4.Addr().Next().String() {
		t.Errorf("state %q", got)
	}
	// >BYTECOUNT_CLI for both clients' ids, with traffic.
	ids := map[string]bool{}
	for _, bc := range lines["bytecount"] {
		var id string
		var in, out int
		if _, err := fmt.Sscan(bc, &id, &in, &out); err != nil || in <= 0 || out <= 0 {
			t.Errorf("bytecount %q", bc)
		}
		ids[id] = true
	}
	for _, p := range before.VPN.Peers {
		if !ids[strconv.FormatUint(p.ClientID, 10)] {
			t.Errorf("no bytecount for %s (client id %d): %q", p.Name, p.ClientID, lines["bytecount"])
		}
	}
	if len(lines["client"]) != 2 {
		t.Errorf("status 3 clients %q", lines["client"])
	}
	for _, c := range lines["client"] {
		f := strings.Fields(c)
		if p := peerByName(before, f[0]); p == nil || f[1] != strconv.FormatUint(p.ClientID, 10) {
			t.Errorf("status 3 client %q, snapshot %+v", c, p)
		}
	}
	if got := lines["kill"]; len(got) != 1 || got[0] != "SUCCESS: client-kill command succeeded" {
		t.Errorf("client-kill: %q", got)
	}
	if n := m.snapshot(t).Monitoring["management_connections"]; n < 2 {
		t.Errorf("status counts %d management connections", n)
	}
	if got := lines["signal"]; len(got) != 1 || got[0] != "<nil>" {
		t.Errorf("signal: %q", got)
	}
	if !waitCond(10*time.Second, func() bool { return strings.Count(m.log(), `msg=reloaded`) > reloads }) {
		t.Error("ovfwd did not reload on the management interface's SIGHUP")
	}
	// bob was told to restart (openvpn's client-kill default message) and
	// comes back as a new client id; alice stays.
	bobClient := m.clients[1]
	if !waitCond(20*time.Second, func() bool {
		return strings.Contains(bobClient.LogText(), "Connection reset command was pushed by server")
	}) {
		t.Errorf("bob's client was not told to restart:\n%s", tail(bobClient.LogText(), 3000))
	}
	var now *status.Snapshot
	if !waitCond(30*time.Second, func() bool {
		now = m.snapshot(t)
		p := peerByName(now, "bob")
		return p != nil && p.ClientID != bob.ClientID
	}) {
		t.Errorf("bob did not come back with a new client id (was %d): %+v", bob.ClientID, now.VPN.Peers)
	}
	if a, b := peerByName(before, "alice"), peerByName(now, "alice"); b == nil || a.ClientID != b.ClientID {
		t.Errorf("alice was disturbed: %+v -> %+v", a, b)
	}
	m.reping(t, bobClient)
}

// reping sends traffic on a reconnected client's new session, for the
// next readers to see.
func (m *lab) reping(t *testing.T, c *vpne2e.Client) {
	t.Helper()
	if !waitCond(15*time.Second, func() bool {
		_, err := c.NS.Run("ping", "-c", "3", "-i", "0.2", "-W", "2", vpne2e.LANHost4.String())
		return err == nil
	}) {
		t.Errorf("client %d cannot reach the LAN after reconnecting", c.Index)
	}
}

// npm installs the npm package telnet-openvpn in a temporary directory
// and runs testdata/npm/client.js with it against the TCP management
// interface: password, pid, status 2, >BYTECOUNT_CLI, kill bob by name.
func (m *lab) npm(t *testing.T) {
	dir := t.TempDir()
	inst := exec.Command("npm", "install", "--no-audit", "--no-fund", "--prefix", dir, "telnet-openvpn@0.1.9")
	if out, err := inst.CombinedOutput(); err != nil {
		t.Fatalf("npm install telnet-openvpn: %v\n%s", err, out)
	}
	script, err := filepath.Abs(filepath.Join("testdata", "npm", "client.js"))
	if err != nil {
		t.Fatal(err)
	}
	before := m.snapshot(t)
	bob := peerByName(before, "bob")
	host, port, _ := strings.Cut(mgmtTCP, ":")
	out, err := m.App.Run("env", "NODE_PATH="+filepath.Join(dir, "node_modules"), "node", script, host, port, mgmtPassword, "bob")
	t.Logf("telnet-openvpn:\n%s", out)
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	type event struct {
		Data  map[string]any `json:"data"`
		Log   string         `json:"log"`
		Error string         `json:"error"`
	}
	var evs []event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		evs = append(evs, e)
	}
	var pid string
	var logs, successes []string
	counts := map[string]bool{}
	for _, e := range evs {
		if e.Error != "" {
			t.Errorf("telnet-openvpn error: %s", e.Error)
		}
		logs = append(logs, strings.TrimSpace(e.Log))
		if p, ok := e.Data["pid"].(string); ok {
			pid = p
		}
		if s, ok := e.Data["success"].(string); ok {
			successes = append(successes, strings.TrimSpace(s))
		}
		if bc, ok := e.Data["bytecount_cli"].([]any); ok && len(bc) == 3 && bc[1] != "0" && bc[2] != "0" {
			counts[fmt.Sprint(bc[0])] = true
		}
	}
	all := strings.Join(logs, "\n")
	if !strings.Contains(all, "SUCCESS: password is correct") {
		t.Errorf("password not accepted: %q", logs)
	}
	if pid != strconv.Itoa(before.PID) {
		t.Errorf("pid %q, want %d", pid, before.PID)
	}
	for _, p := range before.VPN.Peers {
		if !regexp.MustCompile(`(?m)^CLIENT_LIST,` + p.Name + `,` + regexp.QuoteMeta(status.RealAddress(p.Real)) + `,`).MatchString(all) {
			t.Errorf("status 2 lacks %s:\n%s", p.Name, all)
		}
		if !counts[strconv.FormatUint(p.ClientID, 10)] {
			t.Errorf("no >BYTECOUNT_CLI with traffic for %s (client id %d)", p.Name, p.ClientID)
		}
	}
	if !slices.Contains(successes, "common name 'bob' found, 1 client(s) killed") {
		t.Errorf("kill bob: %q", successes)
	}
	var now *status.Snapshot
	if !waitCond(30*time.Second, func() bool {
		now = m.snapshot(t)
		p := peerByName(now, "bob")
		return p != nil && p.ClientID != bob.ClientID
	}) {
		t.Errorf("bob did not come back after the kill (was client id %d): %+v", bob.ClientID, now.VPN.Peers)
	}
	m.reping(t, m.clients[1])
}

// collectd switches the status file to version v (a reload) and runs
// collectd's openvpn plugin on it for a few seconds: the csv plugin must
// record both clients' traffic and the user count.
func (m *lab) collectd(t *testing.T, v int) {
	b, err := os.ReadFile(m.srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := regexp.MustCompile(`file_version = \d`).ReplaceAllString(string(b), fmt.Sprintf("file_version = %d", v))
	if err := os.WriteFile(m.srv.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.srv.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	first := map[int]string{1: "OpenVPN CLIENT LIST\n", 2: "TITLE,", 3: "TITLE\t"}[v]
	var text string
	if !waitCond(10*time.Second, func() bool {
		b, _ := os.ReadFile(m.file)
		text = string(b)
		return strings.HasPrefix(text, first) && strings.Contains(text, "alice") && strings.Contains(text, "bob")
	}) {
		t.Fatalf("status file not in version %d after the reload:\n%s", v, text)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "collectd.conf")
	err = os.WriteFile(conf, []byte(fmt.Sprintf(`Hostname "mon"
FQDNLookup false
Interval 1
BaseDir %q
PIDFile %q
PluginDir "/usr/lib/collectd"
TypesDB "/usr/share/collectd/types.db"
LoadPlugin openvpn
LoadPlugin csv
<Plugin openvpn>
  StatusFile %q
  CollectIndividualUsers true
  CollectUserCount true
</Plugin>
<Plugin csv>
  DataDir %q
  StoreRates false
</Plugin>
`, dir, filepath.Join(dir, "collectd.pid"), m.file, filepath.Join(dir, "csv"))), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd, err := m.App.Start(&stdout, &stderr, "collectd", "-f", "-C", conf)
	if err != nil {
		t.Fatal(err)
	}
	csv := func(glob string) [][]string {
		files, _ := filepath.Glob(filepath.Join(dir, "csv", "mon", glob))
		if len(files) != 1 {
			return nil
		}
		b, _ := os.ReadFile(files[0])
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n")[1:] {
			rows = append(rows, strings.Split(l, ","))
		}
		return rows
	}
	ok := waitCond(15*time.Second, func() bool {
		return len(csv("openvpn-alice/if_octets-*")) >= 2 && len(csv("openvpn-bob/if_octets-*")) >= 2
	})
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	_ = cmd.Wait()
	if !ok {
		t.Fatalf("collectd recorded no traffic for both clients from the version %d file:\nstdout:\n%s\nstderr:\n%s\nfile:\n%s",
			v, stdout.String(), stderr.String(), text)
	}
	snap := m.snapshot(t)
	for _, cn := range []string{"alice", "bob"} {
		rows := csv("openvpn-" + cn + "/if_octets-*")
		last := rows[len(rows)-1]
		rx, _ := strconv.ParseFloat(last[1], 64)
		tx, _ := strconv.ParseFloat(last[2], 64)
		p := peerByName(snap, cn)
		if rx <= 0 || tx <= 0 || p == nil || rx > float64(p.LinkRx) || tx > float64(p.LinkTx) {
			t.Errorf("collectd v%d %s: rx %v tx %v; ovfwd since: %+v", v, cn, rx, tx, p)
		}
		t.Logf("collectd v%d: %s rx %.0f tx %.0f bytes", v, cn, rx, tx)
	}
	users, _ := filepath.Glob(filepath.Join(dir, "csv", "mon", "openvpn-*", "users-*"))
	if len(users) != 1 {
		t.Errorf("collectd v%d: user count files %q", v, users)
	} else if b, _ := os.ReadFile(users[0]); !strings.Contains(string(b), ",2.000000") {
		t.Errorf("collectd v%d: user count:\n%s", v, b)
	}
}

// mgmtStatus asks the management interface on sock for "status N" and
// returns the answer through END.
func mgmtStatus(t *testing.T, sock string, version int) string {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	if l, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(l, ">INFO:") {
		t.Fatalf("greeting %q %v", l, err)
	}
	fmt.Fprintf(c, "status %d\n", version)
	var b strings.Builder
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("status %d: %v after %q", version, err, b.String())
		}
		if strings.HasPrefix(l, ">") {
			continue
		}
		b.WriteString(l)
		if l == "END\r\n" {
			return b.String()
		}
	}
}

// normalize turns a status output (version 2 or 3, lines ended by eol)
// into lines without what differs between two runs of the same clients:
// the title, times, byte counts, client ports, the broadcast queue length
// (ovfwd has none); client and routing rows are sorted (openvpn prints
// them in hash order). Each value taken out must have openvpn's form.
func normalize(t *testing.T, text, eol string, version int) []string {
	t.Helper()
	sep := ","
	if version == 3 {
		sep = "\t"
	}
	date := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)
	num := regexp.MustCompile(`^\d+$`)
	real := regexp.MustCompile(`^(198\.18\.140\.\d+):\d+$`)
	var head, clients, routes, tail []string
	for _, l := range strings.Split(strings.TrimSuffix(text, eol), eol) {
		f := strings.Split(l, sep)
		must := func(ok bool, what string) {
			if !ok {
				t.Errorf("%s not in openvpn's form in %q", what, l)
			}
		}
		switch f[0] {
		case "TITLE":
			must(len(f) == 2 && strings.HasPrefix(f[1], "OpenVPN 2.6"), "title")
			head = append(head, "TITLE")
		case "TIME":
			must(len(f) == 3 && date.MatchString(f[1]) && num.MatchString(f[2]), "time")
			head = append(head, "TIME")
		case "CLIENT_LIST":
			must(len(f) == 13 && real.MatchString(f[2]) && num.MatchString(f[5]) && num.MatchString(f[6]) &&
				date.MatchString(f[7]) && num.MatchString(f[8]), "client")
			if len(f) == 13 {
				f[2] = real.ReplaceAllString(f[2], "$1:PORT")
				f[5], f[6], f[7], f[8] = "BYTES", "BYTES", "DATE", "TIME_T"
			}
			clients = append(clients, strings.Join(f, sep))
		case "ROUTING_TABLE":
			must(len(f) == 6 && real.MatchString(f[3]) && date.MatchString(f[4]) && num.MatchString(f[5]), "route")
			if len(f) == 6 {
				f[3] = real.ReplaceAllString(f[3], "$1:PORT")
				f[4], f[5] = "DATE", "TIME_T"
			}
			routes = append(routes, strings.Join(f, sep))
		case "HEADER":
			if f[1] == "ROUTING_TABLE" {
				slices.Sort(clients)
				head = append(head, clients...)
			}
			head = append(head, l)
		default:
			if len(f) == 3 && f[1] == "Max bcast/mcast queue length" {
				f[2] = "N"
			}
			tail = append(tail, strings.Join(f, sep))
		}
	}
	slices.Sort(routes)
	return append(append(head, routes...), tail...)
}

// compareWithOpenVPN runs the same clients against a stock openvpn 2.6
// server in the same namespaces, with the same pools, status file and
// management socket, and compares its status file (versions 2 and 3) and
// its "status 3" with ovfwd's, field by field.
func (m *lab) compareWithOpenVPN(t *testing.T) {
	if _, err := exec.LookPath("openvpn"); err != nil {
		t.Fatal("openvpn is not installed")
	}
	// readFile waits for the file in the format prefix starts, written
	// (its TIME) a second or more after both clients were up, so that
	// neither is still connecting in it.
	var upAt time.Time
	timeLine := regexp.MustCompile(`(?m)^TIME[,\t][^,\t]*[,\t](\d+)$`)
	readFile := func(prefix string) string {
		var text string
		if !waitCond(10*time.Second, func() bool {
			b, _ := os.ReadFile(m.file)
			text = string(b)
			f := timeLine.FindStringSubmatch(text)
			if f == nil || !strings.HasPrefix(text, prefix) {
				return false
			}
			at, _ := strconv.ParseInt(f[1], 10, 64)
			return at > upAt.Unix() && strings.Count(text, "\nCLIENT_LIST"+prefix[5:6]) == 2
		}) {
			t.Fatalf("status file:\n%s", text)
		}
		return text
	}
	setVersion := func(v int) {
		b, err := os.ReadFile(m.srv.Config)
		if err != nil {
			t.Fatal(err)
		}
		cfg := regexp.MustCompile(`file_version = \d`).ReplaceAllString(string(b), fmt.Sprintf("file_version = %d", v))
		if err := os.WriteFile(m.srv.Config, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := m.srv.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh ovfwd, so that client ids start at 0 as openvpn's, and the
	// clients connected one after the other, in the same order for both.
	restart := func(start func()) {
		for _, c := range m.clients {
			c.Stop()
		}
		start()
		for _, c := range m.clients {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitUp(45 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
		upAt = time.Now()
	}
	restart(func() {
		m.srv.Stop()
		var err error
		if m.srv, err = m.StartOvfwd(m.bin, m.opts); err != nil {
			t.Fatal(err)
		}
	})
	ours := map[string]string{}
	setVersion(3)
	ours["file 3"] = readFile("TITLE\t")
	ours["status 3"] = mgmtStatus(t, m.mgmt, 3)
	setVersion(2)
	ours["file 2"] = readFile("TITLE,")

	// The same clients, in the same order, against openvpn.
	theirs := map[string]string{}
	var ovpn *vpne2e.Server
	for _, v := range []int{2, 3} {
		sock := filepath.Join(m.Dir, fmt.Sprintf("openvpn-mgmt%d.sock", v))
		restart(func() {
			if ovpn != nil {
				ovpn.Stop()
			} else {
				m.srv.Stop()
			}
			var err error
			ovpn, err = m.StartOpenVPN(vpne2e.ServerOptions{Ciphers: []string{"AES-256-GCM"}, OpenVPN: []string{
				"status " + m.file + " 1", fmt.Sprintf("status-version %d", v), "management " + sock + " unix",
				"script-security 2", "auth-user-pass-verify /bin/true via-file"}})
			if err != nil {
				t.Fatal(err)
			}
		})
		theirs[fmt.Sprintf("file %d", v)] = readFile(map[int]string{2: "TITLE,", 3: "TITLE\t"}[v])
		if v == 3 {
			theirs["status 3"] = mgmtStatus(t, sock, 3)
		}
	}
	for _, c := range m.clients {
		c.Stop()
	}
	ovpn.Stop()
	for _, k := range []string{"file 2", "file 3", "status 3"} {
		eol, v := "\n", 2
		if k == "status 3" {
			eol = "\r\n"
		}
		if strings.HasSuffix(k, "3") {
			v = 3
		}
		a, b := normalize(t, ours[k], eol, v), normalize(t, theirs[k], eol, v)
		if !slices.Equal(a, b) {
			t.Errorf("%s: ovfwd's differs from openvpn's:\novfwd:\n%s\nopenvpn:\n%s\n(as written:\n%s\n%s)",
				k, strings.Join(a, "\n"), strings.Join(b, "\n"), ours[k], theirs[k])
		}
		t.Logf("%s: ovfwd:\n%s\nopenvpn:\n%s", k, ours[k], theirs[k])
	}
}

// readOnlyHelperEnv makes the test binary the client of readOnly.
const readOnlyHelperEnv = "OVFWD_MONITOR_READONLY_SOCKET"

// readOnlyHelper asks for "status 2" and "kill alice" on sock and prints
// both answers' first lines.
func readOnlyHelper(sock string) {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	r.ReadString('\n') // greeting
	for _, cmd := range []string{"status 2", "kill alice"} {
		fmt.Fprintf(c, "%s\n", cmd)
		l, err := r.ReadString('\n')
		fmt.Printf("%s: %q %v\n", cmd, strings.TrimSpace(l), err)
		for strings.HasPrefix(cmd, "status") && err == nil && l != "END\r\n" {
			l, err = r.ReadString('\n')
		}
	}
}

// readOnly: with the management socket opened to everyone (as an operator
// might for a monitoring user), a process that is not root, the daemon's
// user or in its group reads the status, and its kill is refused by the
// status socket's rule in the running daemon; alice stays connected.
func (m *lab) readOnly(t *testing.T) {
	for _, p := range []string{filepath.Dir(m.mgmt), m.mgmt} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o005|map[bool]os.FileMode{true: 0o002}[p == m.mgmt]); err != nil {
			t.Fatal(err)
		}
	}
	before := m.snapshot(t)
	cmd := exec.Command("setpriv", "--reuid=65533", "--regid=65533", "--clear-groups", os.Args[0], "-test.run=^TestThirdPartyClients$")
	cmd.Env = append(os.Environ(), readOnlyHelperEnv+"="+m.mgmt)
	out, err := cmd.CombinedOutput()
	t.Logf("as uid 65533:\n%s", out)
	if err != nil {
		t.Fatalf("helper: %v", err)
	}
	if !strings.Contains(string(out), `status 2: "TITLE,OpenVPN 2.6`) ||
		!strings.Contains(string(out), `kill alice: "ERROR: permission denied`) {
		t.Errorf("a read-only peer was not served read-only:\n%s", out)
	}
	now := m.snapshot(t)
	if a, b := peerByName(before, "alice"), peerByName(now, "alice"); b == nil || a.ClientID != b.ClientID {
		t.Errorf("alice was disconnected by a read-only peer: %+v -> %+v", a, b)
	}
	if now.Monitoring["management_denied"] == 0 {
		t.Errorf("the refusal is not counted: %v", now.Monitoring)
	}
}
