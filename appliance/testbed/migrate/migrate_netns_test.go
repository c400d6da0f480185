package migrate_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
)

const (
	easyrsa    = "/usr/share/easy-rsa/easyrsa"
	testdata   = "../../../config/openvpnconf/testdata"
	serverName = "server_MiGrAtIoN0000000" // openvpn-install's (fixed) server name
)

// pkiFiles is an easy-rsa PKI as easy-rsa lays it out (pki/ 0700, keys
// 0600 root), and the keys openvpn --genkey makes beside it.
type pkiFiles struct {
	dir                                  string // the easy-rsa directory; pki/ is in it
	ta, tcV2Server, tcV2Client, tlsCrypt string
}

func (p pkiFiles) path(rel string) string { return filepath.Join(p.dir, "pki", rel) }

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

func sh(t *testing.T, env []string, args ...string) string {
	t.Helper()
	c := exec.Command(args[0], args[1:]...)
	c.Env = append(os.Environ(), env...)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

// newPKI runs easy-rsa as an operator does (EC keys, for speed), with a
// server certificate for each server name the configurations' client
// profiles expect, one client, a CRL and the wrapping keys.
func newPKI(t *testing.T, dir string) pkiFiles {
	t.Helper()
	p := pkiFiles{dir: dir}
	env := []string{"EASYRSA_BATCH=1", "EASYRSA_PKI=" + filepath.Join(dir, "pki"), "EASYRSA_ALGO=ec", "EASYRSA_CURVE=prime256v1"}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, step := range [][]string{{"init-pki"}, {"build-ca", "nopass"}, {"build-server-full", "server", "nopass"},
		{"build-server-full", serverName, "nopass"}, {"build-client-full", "client1", "nopass"}, {"gen-crl"}} {
		c := exec.Command(easyrsa, step...)
		c.Dir, c.Env = dir, append(os.Environ(), env...)
		if step[0] == "build-ca" {
			c.Env = append(c.Env, "EASYRSA_REQ_CN=Migration CA")
		}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("easyrsa %v: %v\n%s", step, err, out)
		}
	}
	p.ta, p.tlsCrypt = filepath.Join(dir, "ta.key"), filepath.Join(dir, "tc.key")
	p.tcV2Server, p.tcV2Client = filepath.Join(dir, "tls-crypt-v2.key"), filepath.Join(dir, "client1-tc-v2.key")
	sh(t, nil, "openvpn", "--genkey", "secret", p.ta)
	sh(t, nil, "openvpn", "--genkey", "secret", p.tlsCrypt)
	sh(t, nil, "openvpn", "--genkey", "tls-crypt-v2-server", p.tcV2Server)
	sh(t, nil, "openvpn", "--tls-crypt-v2", p.tcV2Server, "--genkey", "tls-crypt-v2-client", p.tcV2Client)
	for _, f := range []string{p.ta, p.tlsCrypt, p.tcV2Server, p.tcV2Client} {
		if err := os.Chmod(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// copyAs copies src to dst with mode (root-owned), as an installer does.
func copyAs(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	write(t, dst, read(t, src), mode)
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

// inline is the blocks a profile generator appends.
func inline(t *testing.T, blocks ...string) string {
	var b strings.Builder
	for i := 0; i < len(blocks); i += 2 {
		fmt.Fprintf(&b, "<%s>\n%s</%s>\n", blocks[i], strings.TrimRight(read(t, blocks[i+1]), "\n")+"\n", blocks[i])
	}
	return b.String()
}

// certBody strips what easy-rsa puts before the PEM block of an issued
// certificate (its text dump), as profile generators do.
func certBody(t *testing.T, path string) string {
	s := read(t, path)
	if i := strings.Index(s, "-----BEGIN CERTIFICATE-----"); i > 0 {
		s = s[i:]
	}
	return s
}

// A migration: the server.conf as the operator has it (addresses moved to
// the lab's), and the client profile in that configuration's style.
type migration struct {
	name string
	v6   bool // the configuration gives clients IPv6
	// easyrsaInEtc: the easy-rsa tree is etc/easy-rsa (PiVPN's
	// /etc/openvpn/easy-rsa), not beside it.
	easyrsaInEtc bool
	pool         string // the client's address comes from it
	setup        func(t *testing.T, p pkiFiles, etc, state string) (conf, profile string)
}

var serverAddr = vpne2e.ServerAddr.String()

func migrations() []migration {
	return []migration{
		{name: "debian", pool: "198.18.142.", setup: func(t *testing.T, p pkiFiles, etc, state string) (string, string) {
			// Debian's sample, with what its comments tell the operator
			// to do: their own addresses and LAN route, and tls-auth on
			// (ovfwd needs a wrapped control channel).
			conf := read(t, filepath.Join(testdata, "debian-server.conf"))
			conf = strings.NewReplacer(
				"10.8.0.0 255.255.255.0", "198.18.142.0 255.255.255.0",
				";push \"route 192.168.10.0 255.255.255.0\"", "push \"route 198.18.141.0 255.255.255.0\"",
				";tls-auth ta.key 0", "tls-auth ta.key 0",
				"/var/log/openvpn/ipp.txt", filepath.Join(state, "ipp.txt"),
			).Replace(conf)
			copyAs(t, p.path("ca.crt"), filepath.Join(etc, "ca.crt"), 0o644)
			copyAs(t, p.path("issued/server.crt"), filepath.Join(etc, "server.crt"), 0o644)
			copyAs(t, p.path("private/server.key"), filepath.Join(etc, "server.key"), 0o600)
			copyAs(t, p.ta, filepath.Join(etc, "ta.key"), 0o600)
			// The client side: the sample client.conf and its files.
			cdir := filepath.Join(etc, "client")
			copyAs(t, p.path("ca.crt"), filepath.Join(cdir, "ca.crt"), 0o644)
			copyAs(t, p.path("issued/client1.crt"), filepath.Join(cdir, "client.crt"), 0o644)
			copyAs(t, p.path("private/client1.key"), filepath.Join(cdir, "client.key"), 0o600)
			copyAs(t, p.ta, filepath.Join(cdir, "ta.key"), 0o600)
			prof := strings.NewReplacer("remote my-server-1 1194", "remote "+serverAddr+" 1194", ";tls-auth ta.key 1", "tls-auth ta.key 1").
				Replace(read(t, filepath.Join(testdata, "debian-client.conf")))
			return conf, prof
		}},
		{name: "pivpn", easyrsaInEtc: true, pool: "198.18.142.", setup: func(t *testing.T, p pkiFiles, etc, state string) (string, string) {
			// PiVPN keeps the easy-rsa tree under /etc/openvpn/easy-rsa
			// and the CRL and ccd beside it; here etc stands for /etc/openvpn.
			conf := strings.NewReplacer(
				"/etc/openvpn/", etc+"/",
				"dh2048.pem", "dh.pem",
				"10.8.0.0 255.255.255.0", "198.18.142.0 255.255.255.0",
			).Replace(read(t, filepath.Join(testdata, "pivpn-server_config.txt")))
			copyAs(t, p.ta, p.path("ta.key"), 0o600)
			copyAs(t, p.path("crl.pem"), filepath.Join(etc, "crl.pem"), 0o644)
			write(t, filepath.Join(etc, "ccd", "client1"), "ifconfig-push 198.18.142.77 255.255.255.0\n", 0o644)
			prof := strings.NewReplacer("IPv4pub", serverAddr, "SRVRNAME", "server").Replace(read(t, filepath.Join(testdata, "pivpn-Default.txt")))
			prof += inline(t, "ca", p.path("ca.crt")) + "<cert>\n" + certBody(t, p.path("issued/client1.crt")) + "</cert>\n" +
				inline(t, "key", p.path("private/client1.key"), "tls-auth", p.ta)
			return conf, prof
		}},
		{name: "openvpn-install", v6: true, pool: "198.18.142.", setup: func(t *testing.T, p pkiFiles, etc, state string) (string, string) {
			conf := strings.NewReplacer(
				"10.8.0.0 255.255.255.0", "198.18.142.0 255.255.255.0",
				"fd42:42:42:42::/112", "2001:db8:142::/112",
			).Replace(read(t, filepath.Join(testdata, "openvpn-install-server.conf")))
			// What the script copies to /etc/openvpn/server.
			copyAs(t, p.path("ca.crt"), filepath.Join(etc, "ca.crt"), 0o644)
			copyAs(t, p.path("issued/"+serverName+".crt"), filepath.Join(etc, serverName+".crt"), 0o644)
			copyAs(t, p.path("private/"+serverName+".key"), filepath.Join(etc, serverName+".key"), 0o600)
			copyAs(t, p.path("crl.pem"), filepath.Join(etc, "crl.pem"), 0o644)
			copyAs(t, p.tcV2Server, filepath.Join(etc, "tls-crypt-v2.key"), 0o600)
			if err := os.MkdirAll(filepath.Join(etc, "ccd"), 0o755); err != nil {
				t.Fatal(err)
			}
			prof := strings.ReplaceAll(read(t, filepath.Join(testdata, "openvpn-install-client-template.txt")), "remote SERVER 1194", "remote "+serverAddr+" 1194")
			prof += inline(t, "ca", p.path("ca.crt")) + "<cert>\n" + certBody(t, p.path("issued/client1.crt")) + "</cert>\n" +
				inline(t, "key", p.path("private/client1.key"), "tls-crypt-v2", p.tcV2Client)
			return conf, prof
		}},
		{name: "access-server", pool: "198.18.14", setup: func(t *testing.T, p pkiFiles, etc, state string) (string, string) {
			conf := strings.NewReplacer(
				"172.27.224.0 255.255.240.0", "198.18.144.0 255.255.240.0",
				"192.168.0.0 255.255.255.0", "198.18.141.0 255.255.255.0",
				"/usr/local/sbin/", etc+"/bin/",
				"CA-PEM\n", read(t, p.path("ca.crt")),
				"CERT-PEM\n", certBody(t, p.path("issued/server.crt")),
				"KEY-PEM\n", read(t, p.path("private/server.key")),
				"TLS-CRYPT-KEY\n", read(t, p.tlsCrypt),
			).Replace(read(t, filepath.Join(testdata, "access-server-udp.conf")))
			// The login check the server runs (auth-user-pass-verify via-file).
			write(t, filepath.Join(etc, "bin", "check-login"), "#!/bin/sh\n{ read -r u; read -r p; } < \"$1\"\n[ \"$u\" = alice ] && [ \"$p\" = s3cret ]\n", 0o755)
			write(t, filepath.Join(etc, "client", "creds"), "alice\ns3cret\n", 0o600)
			// Its client-connect script, which import maps to [vpn]
			// client_connect: it admits every client.
			write(t, filepath.Join(etc, "bin", "client-connect"), "#!/bin/sh\nexit 0\n", 0o755)
			prof := "client\ndev tun\nproto udp\nremote " + serverAddr + " 1194\nnobind\nremote-cert-tls server\nauth-user-pass creds\nverb 3\n" +
				inline(t, "ca", p.path("ca.crt")) + "<cert>\n" + certBody(t, p.path("issued/client1.crt")) + "</cert>\n" +
				inline(t, "key", p.path("private/client1.key"), "tls-crypt", p.tlsCrypt)
			return conf, prof
		}},
	}
}

var fixStep = regexp.MustCompile(`as root: (chgrp \S+ [^\s);]+ && chmod \S+ [^\s);]+)`)

func TestMigrate(t *testing.T) {
	nstest.RequireRoot(t)
	for _, tool := range []string{"openvpn", easyrsa} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (.ci/install-deps installs it)", tool)
		}
	}
	bin := nstest.BuildOvfwd(t)
	u := unittest.Load(t)
	dir := unittest.TempDir(t, u)
	l, err := vpne2e.NewLab("mig", dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	// The unit's user runs the binary (and check's child): a copy it can
	// reach.
	if bin, err = u.Executable(bin, dir); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations() {
		t.Run(m.name, func(t *testing.T) { migrate(t, l, u, bin, filepath.Join(dir, m.name), m) })
	}
	t.Run("access-server-tcp", func(t *testing.T) {
		out, code := ovfwd(t, bin, "import", filepath.Join(testdata, "access-server-tcp.conf"))
		if code != 1 || !strings.Contains(out, "proto tcp-server: refused, fatal: not supported: ovfwd's VPN is UDP only") || !strings.Contains(out, "nothing written") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
}

func ovfwd(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func migrate(t *testing.T, l *vpne2e.Lab, u *unit.Unit, bin, base string, m migration) {
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	etc := filepath.Join(base, "etc-openvpn")
	state := filepath.Join(l.Dir, "state")
	ersa := filepath.Join(base, "easy-rsa")
	if m.easyrsaInEtc {
		ersa = filepath.Join(etc, "easy-rsa")
	}
	p := newPKI(t, ersa)
	conf, profile := m.setup(t, p, etc, state)
	confPath := filepath.Join(etc, "server.conf")
	write(t, confPath, conf, 0o644)

	// import, as an operator runs it (as root), into /etc/ovfwd.
	cfg := filepath.Join(base, "etc-ovfwd", "ovfwd.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	out, code := ovfwd(t, bin, "import", confPath, "-o", cfg,
		"-port", fmt.Sprintf("p0=%s/24,%s/64", vpne2e.ServerAddr, vpne2e.ServerAddr6),
		"-port", fmt.Sprintf("p1=%s/24,%s/64", vpne2e.LANGW4, vpne2e.LANGW6))
	if code != 0 {
		t.Fatalf("import: exit %d\n%s", code, out)
	}
	t.Logf("import:\n%s", out)
	sock := filepath.Join(l.Dir, "run", "ovfwd.sock")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "\n[status]\nsocket = %q\n\n[metrics]\nlisten = \"\"\n", sock)
	f.Close()

	// check, as root: it checks as the unit's user. Follow only what it
	// says until it passes.
	user := u.User
	if u.NoUser {
		user = "nobody" // what the harness runs the daemon as here
	}
	var steps []string
	for i := 0; ; i++ {
		out, code := ovfwd(t, bin, "check", "-user", user, cfg)
		if code == 0 {
			break
		}
		found := fixStep.FindAllStringSubmatch(out, -1)
		if i == 8 || len(found) == 0 {
			t.Fatalf("check fails with no step to follow (after %q):\n%s", steps, out)
		}
		for _, s := range found {
			sh(t, nil, "sh", "-c", s[1])
			steps = append(steps, s[1])
		}
	}
	t.Logf("check passed after the steps it named: %q", steps)

	// ovfwd run, as the unit runs it.
	argv, err := u.Command(l.Dir, bin, "run", "-c", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var srvLog netns.SyncBuffer
	srv, err := startIn(l.App, &srvLog, argv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(srv) })
	unittest.Check(t, u, srv.Process.Pid)
	up := false
	for i := 0; i < 300 && !up; i++ {
		if st, err := status.Fetch(sock, time.Second); err == nil && st.VPN != nil {
			up = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !up {
		t.Fatalf("ovfwd VPN not up:\n%s", srvLog.String())
	}

	// A stock openvpn 2.6 client with the configuration's own profile.
	cdir := filepath.Join(etc, "client")
	write(t, filepath.Join(cdir, "client.ovpn"), profile, 0o600)
	clientLog := filepath.Join(base, "client.log")
	cl := startClient(t, l, cdir, clientLog)
	if !waitLog(clientLog, "Initialization Sequence Completed", 45*time.Second) {
		t.Fatalf("client not up in 45 s:\n%s\n--- ovfwd:\n%s", readQuiet(clientLog), srvLog.String())
	}
	v4, v6, _ := l.Clients[0].GlobalAddrs("tun0")
	if !strings.HasPrefix(v4.String(), m.pool) {
		t.Fatalf("tun0 has %v, want an address of %s*", v4, m.pool)
	}
	if m.name == "pivpn" && v4.String() != "198.18.142.77" {
		t.Errorf("ccd ifconfig-push not applied: tun0 %v", v4)
	}
	targets := []string{vpne2e.LANHost4.String()}
	if m.v6 {
		if !v6.IsValid() {
			t.Fatalf("no IPv6 address on tun0")
		}
		targets = append(targets, vpne2e.LANHost6.String())
	}
	for _, dst := range targets {
		// Only the tunnel leads there: the client's one other link is
		// the outside subnet, and the appliance namespace forwards nothing
		// in the kernel.
		if out, err := l.Clients[0].Run("ip", "route", "get", dst); err != nil || !strings.Contains(out, "dev tun0") {
			t.Fatalf("route to %s is not through tun0: %v %s", dst, err, out)
		}
		if out, err := l.Clients[0].Run("ping", "-c", "3", "-i", "0.2", "-W", "2", dst); err != nil {
			t.Fatalf("ping %s through the tunnel: %v\n%s\n--- client:\n%s\n--- ovfwd:\n%s", dst, err, out, readQuiet(clientLog), srvLog.String())
		}
	}
	t.Logf("client %s reached %v through ovfwd", tunAddrs(v4, v6), targets)
	stop(cl)
	if m.name == "access-server" {
		wrongPassword(t, l, cdir, base)
	}
	stop(srv)
	if m.name == "access-server" {
		privilegedPort(t, u, l, bin, cfg, user)
	}
}

// wrongPassword: the imported auth_user_pass_verify is the server's
// check-login, which refuses this password.
func wrongPassword(t *testing.T, l *vpne2e.Lab, cdir, base string) {
	write(t, filepath.Join(cdir, "creds"), "alice\nwrong\n", 0o600)
	log := filepath.Join(base, "client-wrong.log")
	cl := startClient(t, l, cdir, log)
	defer stop(cl)
	if !waitLog(log, "AUTH_FAILED", 30*time.Second) || strings.Contains(readQuiet(log), "Initialization Sequence Completed") {
		t.Fatalf("a wrong password was not refused:\n%s", readQuiet(log))
	}
	t.Logf("wrong password: the client got AUTH_FAILED")
}

// privilegedPort: on UDP 443, check warns that the unit cannot bind it,
// and ovfwd run as the unit indeed cannot.
func privilegedPort(t *testing.T, u *unit.Unit, l *vpne2e.Lab, bin, cfg, user string) {
	text := strings.Replace(read(t, cfg), "\nport = 1194\n", "\nport = 443\n", 1)
	write(t, cfg, text, 0o644)
	out, code := ovfwd(t, bin, "check", "-user", user, cfg)
	if code != 0 || !strings.Contains(out, "warning:") || !strings.Contains(out, "CAP_NET_BIND_SERVICE") {
		t.Fatalf("check on port 443: exit %d\n%s", code, out)
	}
	argv, err := u.Command(l.Dir, bin, "run", "-c", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var log netns.SyncBuffer
	srv, err := startIn(l.App, &log, argv...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case <-done:
		if !strings.Contains(log.String(), "permission denied") {
			t.Fatalf("ovfwd on port 443 exited, but not for want of the privilege:\n%s", log.String())
		}
		t.Logf("port 443: check warned %q; ovfwd run as the unit: %s", lineWith(out, "CAP_NET_BIND_SERVICE"), lineWith(log.String(), "permission denied"))
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("ovfwd ran on port 443 without CAP_NET_BIND_SERVICE, though check warned:\n%s", log.String())
	}
}

func startClient(t *testing.T, l *vpne2e.Lab, cdir, log string) *exec.Cmd {
	t.Helper()
	var ignored bytes.Buffer
	cl, err := l.Clients[0].Start(&ignored, &ignored, "openvpn", "--cd", cdir, "--config", "client.ovpn", "--log", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(cl) })
	return cl
}

// waitLog waits up to d for want in the file at path.
func waitLog(path, want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for i := 0; i < 1000; i++ {
		if strings.Contains(readQuiet(path), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

func lineWith(text, want string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, want) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func tunAddrs(as ...netip.Addr) string {
	var out []string
	for _, a := range as {
		if a.IsValid() {
			out = append(out, a.String())
		}
	}
	return strings.Join(out, " ")
}

func readQuiet(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// startIn starts argv in ns in a process group of its own.
func startIn(ns *netns.NS, log *netns.SyncBuffer, argv ...string) (*exec.Cmd, error) {
	c := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, argv...)...)
	c.Stdout, c.Stderr = log, log
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return c, c.Start()
}

// stop ends a process group this test started: SIGTERM, SIGKILL after 5 s.
func stop(c *exec.Cmd) {
	if c.Process == nil || c.ProcessState != nil {
		return
	}
	pid := c.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}
