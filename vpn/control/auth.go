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

	"github.com/ovfwd/ovfwd/vpn/hooks"
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

	once   sync.Once
	runner *hooks.Runner
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
	_, err := u.VerifyGroup(ctx, r)
	return err
}

// authOutputMax bounds what is kept of the command's standard output.
const authOutputMax = 4096

// VerifyGroup is Verify, and the client's access group when the command
// printed a line "group NAME" on its standard output (the last such line;
// "" without one). ovfwd's extension: openvpn reads no output from the
// command; Access Server's groups and learn-address scripts' per-client
// rules become [[acl]] groups this way.
func (u *UserPass) VerifyGroup(ctx context.Context, r AuthRequest) (string, error) {
	u.once.Do(func() { u.runner = &hooks.Runner{Concurrency: u.Concurrency} })
	timeout := u.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	release, err := u.runner.Acquire(ctx)
	if err != nil {
		return "", errAuthTimeout
	}
	defer release()

	dir, err := os.MkdirTemp(u.Dir, "ovfwd-auth-")
	if err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	defer os.RemoveAll(dir)
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, authFile(r), 0o600); err != nil {
		return "", fmt.Errorf("auth: %w", err)
	}
	control := filepath.Join(dir, "auth_control")
	out := &boundedBuffer{max: authOutputMax}
	err = hooks.Exec(ctx, append(u.Command[:len(u.Command):len(u.Command)], creds), authEnv(r, control), out)
	switch {
	case errors.Is(err, hooks.ErrTimeout):
		return "", errAuthTimeout
	case err == nil:
		return authGroup(out.b), nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		return "", errors.New("authentication failed")
	}
	// Deferred: wait for the verdict in auth_control_file.
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if b, err := os.ReadFile(control); err == nil && len(b) > 0 {
			if b[0] == '1' {
				return authGroup(out.b), nil
			}
			return "", errors.New("authentication failed")
		}
		select {
		case <-ctx.Done():
			return "", errAuthTimeout
		case <-t.C:
		}
	}
}

// boundedBuffer keeps the first max bytes written to it and discards the
// rest (a command printing without end cannot grow the daemon).
type boundedBuffer struct {
	b   []byte
	max int
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if room := w.max - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// authGroup is the last "group NAME" line of out; a name with a control
// character, a space or over 64 bytes is ignored.
func authGroup(out []byte) string {
	g := ""
	for _, l := range strings.Split(string(out), "\n") {
		name, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "group ")
		name = strings.TrimSpace(name)
		if ok && name != "" && len(name) <= 64 && !strings.ContainsFunc(name, func(r rune) bool { return isControl(r) || r == ' ' }) {
			g = name
		}
	}
	return g
}

// authFile is the credentials file: the username and the password on a
// line each. A control character in either becomes '_', as openvpn does
// (ssl.c key_method_2_read: string_mod(password, CC_PRINT, CC_CRLF, '_')),
// so neither can end its line early or add one.
func authFile(r AuthRequest) []byte {
	return []byte(printable(r.Username) + "\n" + printable(r.Password) + "\n")
}

// printable replaces ASCII control characters (NUL, CR, LF, DEL, …) with
// '_'.
func printable(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return '_'
		}
		return r
	}, s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// authEnv is the command's environment: a minimal PATH and the variables
// openvpn sets for user-pass-verify (never the password). Values are
// printable: a certificate's common name may hold a newline.
func authEnv(r AuthRequest, control string) []string {
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"script_type=user-pass-verify",
		"username=" + printable(r.Username),
		"common_name=" + printable(r.CommonName),
		"untrusted_ip=" + r.Source.Addr().Unmap().String(),
		"untrusted_port=" + strconv.Itoa(int(r.Source.Port())),
		"auth_control_file=" + control,
	}
	for _, l := range strings.Split(r.PeerInfo, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && (strings.HasPrefix(k, "IV_") || strings.HasPrefix(k, "UV_")) && !strings.ContainsFunc(k, isControl) {
			env = append(env, k+"="+printable(v))
		}
	}
	return env
}

// failLimiter counts failed logins per source (an IPv4 address or an
// IPv6 /64, sourcePrefix), and the logins in flight with them: past limit
// within window, a source is refused without running the command, so
// concurrent logins cannot all pass before the first failure is counted.
// It holds at most failLimiterSize sources; when full, the one whose
// window began first makes room.
type failLimiter struct {
	mu sync.Mutex
	m  map[netip.Prefix]*failCount
}

type failCount struct {
	n, inflight int
	since       time.Time // the first failure of the window
}

const failLimiterSize = 4096

// begin reports whether src may try a login now; if so, end must follow.
func (f *failLimiter) begin(src netip.Addr, limit int, window time.Duration, now time.Time) bool {
	if limit <= 0 {
		return true
	}
	k := sourcePrefix(src)
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.m[k]
	if c == nil {
		if f.m == nil {
			f.m = map[netip.Prefix]*failCount{}
		}
		f.makeRoom(window, now)
		c = &failCount{since: now}
		f.m[k] = c
	}
	if c.n > 0 && now.Sub(c.since) > window {
		c.n, c.since = 0, now
	}
	if c.n+c.inflight >= limit {
		return false
	}
	c.inflight++
	return true
}

// end records the outcome of a login begin allowed.
func (f *failLimiter) end(src netip.Addr, failed bool, window time.Duration, now time.Time) {
	k := sourcePrefix(src)
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.m[k]
	if c == nil {
		return // begin was not limited (limit 0)
	}
	c.inflight--
	if failed {
		if c.n == 0 || now.Sub(c.since) > window {
			c.n, c.since = 0, now
		}
		c.n++
	}
	if c.n == 0 && c.inflight <= 0 {
		delete(f.m, k)
	}
}

// makeRoom keeps the map below failLimiterSize: expired sources go first,
// then the oldest without a login in flight. Called with mu held.
func (f *failLimiter) makeRoom(window time.Duration, now time.Time) {
	if len(f.m) < failLimiterSize {
		return
	}
	var oldest netip.Prefix
	var oldestSince time.Time
	for k, c := range f.m {
		if c.inflight > 0 {
			continue
		}
		if now.Sub(c.since) > window {
			delete(f.m, k)
			continue
		}
		if !oldest.IsValid() || c.since.Before(oldestSince) {
			oldest, oldestSince = k, c.since
		}
	}
	if len(f.m) >= failLimiterSize && oldest.IsValid() {
		delete(f.m, oldest)
	}
}

// size is how many sources it holds.
func (f *failLimiter) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}
