package control

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// UserPass runs the operator's username/password check the way openvpn's
// `auth-user-pass-verify CMD via-file` does (ssl_verify.c
// verify_user_pass_script): CMD gets the path of a 0600 file holding the
// username and the password on two lines as its last argument, and the
// environment variables username, common_name, untrusted_ip,
// untrusted_port and script_type=user-pass-verify, plus the client's IV_*
// peer info. Exit status 0 admits the client; 2 defers the answer (as
// openvpn's deferred auth): the command, or a process it left behind,
// writes "1" (admit) or "0" (refuse) to the file named by auth_control_file
// before the timeout. Anything else refuses.
//
// Each check runs on the handshake's own goroutine, never the server's
// packet loop; at most Concurrency run at once, and waiting for a slot
// counts against Timeout. The password is never logged, put in the
// environment or on a command line.
type UserPass struct {
	Command     []string      // program and leading arguments
	Timeout     time.Duration // whole check, queueing included; default 30 s
	Concurrency int           // commands at once; default 64
	Dir         string        // where the credential files go; default os.TempDir()

	once  sync.Once
	slots chan struct{}
}

// AuthRequest is what a check is given.
type AuthRequest struct {
	Username, Password string
	CommonName         string // the certificate's, "" without one
	Source             netip.AddrPort
	PeerInfo           string // the client's IV_* lines
}

// errAuthTimeout is the refusal reason when the command does not answer.
var errAuthTimeout = errors.New("authentication timed out")

// Verify runs the check; nil admits.
func (u *UserPass) Verify(ctx context.Context, r AuthRequest) error {
	u.once.Do(func() {
		n := u.Concurrency
		if n <= 0 {
			n = 64
		}
		u.slots = make(chan struct{}, n)
	})
	timeout := u.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case u.slots <- struct{}{}:
	case <-ctx.Done():
		return errAuthTimeout
	}
	defer func() { <-u.slots }()

	dir, err := os.MkdirTemp(u.Dir, "ovfwd-auth-")
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	defer os.RemoveAll(dir)
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte(r.Username+"\n"+r.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	control := filepath.Join(dir, "auth_control")
	cmd := exec.CommandContext(ctx, u.Command[0], append(u.Command[1:len(u.Command):len(u.Command)], creds)...)
	cmd.Env = authEnv(r, control)
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case ctx.Err() != nil:
		return errAuthTimeout
	case err == nil:
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		return errors.New("authentication failed")
	}
	// Deferred: wait for the verdict in auth_control_file.
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(control); err == nil && len(b) > 0 {
			if b[0] == '1' {
				return nil
			}
			return errors.New("authentication failed")
		}
		select {
		case <-ctx.Done():
			return errAuthTimeout
		case <-t.C:
		}
	}
}

// authEnv is the command's environment: a minimal PATH and the variables
// openvpn sets for user-pass-verify (never the password).
func authEnv(r AuthRequest, control string) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"script_type=user-pass-verify",
		"username=" + r.Username,
		"common_name=" + r.CommonName,
		"untrusted_ip=" + r.Source.Addr().Unmap().String(),
		"untrusted_port=" + strconv.Itoa(int(r.Source.Port())),
		"auth_control_file=" + control,
	}
	for _, l := range strings.Split(r.PeerInfo, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && (strings.HasPrefix(k, "IV_") || strings.HasPrefix(k, "UV_")) && !strings.ContainsAny(k+v, "\x00") {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// failLimiter counts failed logins per source address: past limit within
// window, a source is refused without running the command.
type failLimiter struct {
	mu sync.Mutex
	m  map[netip.Addr]failCount
}

type failCount struct {
	n     int
	since time.Time
}

// blocked reports whether src has used up its failures.
func (f *failLimiter) blocked(src netip.Addr, limit int, window time.Duration, now time.Time) bool {
	if limit <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.m[src]
	if !ok || now.Sub(c.since) > window {
		return false
	}
	return c.n >= limit
}

// failed records a failure of src; old entries are swept as it goes.
func (f *failLimiter) failed(src netip.Addr, window time.Duration, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[netip.Addr]failCount{}
	}
	c := f.m[src]
	if now.Sub(c.since) > window {
		c = failCount{since: now}
	}
	c.n++
	f.m[src] = c
	if len(f.m) > 4096 {
		for a, e := range f.m {
			if now.Sub(e.since) > window {
				delete(f.m, a)
			}
		}
	}
}
