package control_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
)

// authScript writes a user-pass-verify command into dir that records its
// environment and arguments per user and answers by username.
func authScript(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "verify.sh")
	script := fmt.Sprintf(`#!/bin/sh
u=$(sed -n 1p "$1"); p=$(sed -n 2p "$1")
env > %[1]s/env.$u; echo "$@" > %[1]s/args.$u
case "$u:$p" in
alice:secret) exit 0;;
slow*:secret) sleep 1; exit 0;;
deferred:secret) (sleep 0.3; echo 1 > "$auth_control_file") & exit 2;;
denied:secret) (sleep 0.3; echo 0 > "$auth_control_file") & exit 2;;
hang:*) exec sleep 30;;
esac
exit 1
`, dir)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUserPassVerify runs the command openvpn's way: admitted, refused,
// deferred either way, timed out; the password is in the 0600 file only,
// never in the environment or the arguments; the file is gone after.
func TestUserPassVerify(t *testing.T) {
	dir := t.TempDir()
	u := &control.UserPass{Command: []string{authScript(t, dir)}, Timeout: 2 * time.Second, Dir: t.TempDir()}
	src := netip.MustParseAddrPort("198.18.9.9:4000")
	for _, c := range []struct {
		user, pass string
		ok         bool
		want       string
	}{
		{"alice", "secret", true, ""},
		{"alice", "wrong", false, "authentication failed"},
		{"deferred", "secret", true, ""},
		{"denied", "secret", false, "authentication failed"},
		{"hang", "secret", false, "authentication timed out"},
	} {
		err := u.Verify(context.Background(), control.AuthRequest{Username: c.user, Password: c.pass, CommonName: "cert-" + c.user, Source: src, PeerInfo: "IV_VER=2.6.14\nIV_PLAT=linux\n"})
		if (err == nil) != c.ok || err != nil && err.Error() != c.want {
			t.Errorf("%s/%s: %v, want ok=%v %q", c.user, c.pass, err, c.ok, c.want)
		}
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.alice"))
	for _, want := range []string{"username=alice", "common_name=cert-alice", "untrusted_ip=198.18.9.9", "untrusted_port=4000", "script_type=user-pass-verify", "IV_PLAT=linux"} {
		if !strings.Contains(string(env), want+"\n") {
			t.Errorf("command environment lacks %s:\n%s", want, env)
		}
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args.alice"))
	if strings.Contains(string(env), "secret") || strings.Contains(string(args), "secret") {
		t.Error("the password reached the environment or the arguments")
	}
	if left, _ := filepath.Glob(filepath.Join(u.Dir, "*")); len(left) != 0 {
		t.Errorf("credential files left behind: %v", left)
	}
}

// TestUserPassConcurrentLogins: 100 clients log in at once through a
// command that takes 1 s, overlapping (not one after another), while an
// established client keeps getting echo replies through the server.
func TestUserPassConcurrentLogins(t *testing.T) {
	n := 100
	if raceEnabled {
		n = 10 // the same paths, without the time bound
	}
	dir := newPKI(t)
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) {
		c.Auth = &control.UserPass{Command: []string{authScript(t, t.TempDir())}, Timeout: 10 * time.Second, Concurrency: 128}
		c.HandshakeRate, c.HandshakeBurst, c.MaxHalfOpen = 1000, 1000, 1000
		c.MaxHalfOpenPerSource = 1000 // all from 127.0.0.1
	})
	base := clientProfile(t, dir, "base", e.addr())
	base.Username, base.Password = "alice", "secret"
	steady := dial(t, base)
	cfgs := make([]control.ClientConfig, n)
	for i := range cfgs {
		cfgs[i] = clientProfile(t, dir, fmt.Sprintf("user%d", i), e.addr())
		cfgs[i].Username, cfgs[i].Password = fmt.Sprintf("slow%d", i), "secret"
	}
	stop := make(chan struct{})
	var pings atomic.Int32
	pingDone := make(chan struct{})
	go func() {
		defer close(pingDone)
		for seq := uint16(100); ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := pingErr(steady, steady.Pushed().Gateway4, seq); err != nil {
				t.Errorf("established client during the logins: %v", err)
				return
			}
			pings.Add(1)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := control.Dial(ctx, cfgs[i])
			if err != nil {
				failed.Add(1)
				t.Errorf("client %d: %v", i, err)
				return
			}
			t.Cleanup(func() { c.Close() })
		}()
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	<-pingDone
	t.Logf("%d logins through a 1 s command in %v; %d echo round trips meanwhile", n, took.Round(time.Millisecond), pings.Load())
	if failed.Load() > 0 {
		t.Fatalf("%d logins failed", failed.Load())
	}
	// One after another they take n seconds: under half of that they
	// overlapped. A bound on overlap, not on speed (a loaded or emulated
	// machine takes several seconds).
	if took >= time.Duration(n/2)*time.Second && !raceEnabled {
		t.Errorf("%d logins through a 1 s command took %v: they ran one after another", n, took)
	}
	if pings.Load() < 2 {
		t.Errorf("only %d echo round trips during the logins", pings.Load())
	}
}

// TestUserPassRefusals: wrong password → AUTH_FAILED to our own client
// (it ends instead of retrying); past the failure limit a source is
// refused without running the command.
func TestUserPassRefusals(t *testing.T) {
	dir := newPKI(t)
	cmdDir := t.TempDir()
	e := startEchoServer(t, dir, "127.0.0.1:0", func(c *control.Config) {
		c.Auth = &control.UserPass{Command: []string{authScript(t, cmdDir)}}
		c.AuthFailLimit, c.AuthFailWindow = 2, time.Minute
	})
	for i := 0; i < 3; i++ {
		cfg := clientProfile(t, dir, fmt.Sprintf("m%d", i), e.addr())
		cfg.Username, cfg.Password = fmt.Sprintf("mallory%d", i), "guess"
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := control.Dial(ctx, cfg)
		cancel()
		want := "authentication failed"
		if i == 2 {
			want = "too many failed logins"
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("attempt %d: %v, want %q", i, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(cmdDir, "env.mallory2")); err == nil {
		t.Error("the command ran for a source past its failure limit")
	}
	if n := e.log.count("guess"); n != 0 {
		t.Errorf("the password appears in %d log lines", n)
	}
}

// pingErr is ping for any goroutine: one echo round trip within 5 tries
// of 1 s.
func pingErr(c *control.Client, dst netip.Addr, seq uint16) error {
	p := c.Pushed()
	if p == nil {
		return fmt.Errorf("client not connected")
	}
	req := icmpEcho(p.IPv4.Addr(), dst, 0x4243, seq, []byte("ovfwd client echo"))
	for try := 0; try < 5; try++ {
		if err := c.Send(req); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		for {
			got, err := c.Recv(ctx)
			if err != nil {
				break
			}
			if len(got) >= 28 && got[20] == 0 && binary.BigEndian.Uint16(got[26:]) == seq {
				cancel()
				return nil
			}
		}
		cancel()
	}
	return fmt.Errorf("no echo reply from %v", dst)
}
