package hooks

import (
	"context"
	"errors"
	"hash/maphash"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Hooks are the operator's client-connect, client-disconnect and
// learn-address commands (program and leading arguments; nil = none).
//
// ClientConnect runs on the connecting client's own handshake goroutine:
// it holds up that client only. ClientDisconnect and LearnAddress run on
// background workers, so a slow command delays no session: each address's
// learn-address calls (and each client's disconnect) stay in the order
// they were made, and a job that finds its worker's queue full is dropped
// and counted rather than waited for.
type Hooks struct {
	Server
	ClientConnect, ClientDisconnect, LearnAddress []string
	Timeout                                       time.Duration // per command, queueing and deferral included; default 30 s
	Runner                                        *Runner       // the bound on commands at once; required
	Dir                                           string        // the files client-connect writes; default os.TempDir()
	Logf                                          func(format string, args ...any)

	Connect, Disconnect, Learn Counters

	once    sync.Once
	workers []chan func()
	seed    maphash.Seed
	wg      sync.WaitGroup
	mu      sync.RWMutex // submit holds it shared, Close exclusively
	stopped bool
}

// queueDepth is each background worker's backlog before jobs are dropped.
const queueDepth = 1024

func (h *Hooks) timeout() time.Duration {
	if h.Timeout <= 0 {
		return 30 * time.Second
	}
	return h.Timeout
}

func (h *Hooks) logf(format string, args ...any) {
	if h.Logf != nil {
		h.Logf(format, args...)
	}
}

// ErrRefused is a client-connect command that said no: a non-zero exit, a
// 0 in the deferred file, or a file that does not parse.
var ErrRefused = errors.New("client-connect refused the client")

// RunConnect runs client-connect for c (multi.c
// multi_client_connect_call_script): the command gets the path of an
// empty configuration file as its last argument and in
// client_connect_config_file, and client_connect_deferred_file. A "2" in
// the deferred file when it exits defers the answer: a process it left
// behind later writes the configuration, then "1" (admit) or "0"
// (refuse), before the timeout. An error refuses the client.
func (h *Hooks) RunConnect(ctx context.Context, c *Client) (Dynamic, error) {
	if len(h.ClientConnect) == 0 {
		return Dynamic{}, nil
	}
	d, err := h.runConnect(ctx, c)
	h.Connect.count(err)
	return d, err
}

func (h *Hooks) runConnect(ctx context.Context, c *Client) (Dynamic, error) {
	ctx, cancel := context.WithTimeout(ctx, h.timeout())
	defer cancel()
	release, err := h.Runner.Acquire(ctx)
	if err != nil {
		return Dynamic{}, err
	}
	dir, err := os.MkdirTemp(h.Dir, "ovfwd-cc-")
	if err != nil {
		release()
		return Dynamic{}, err
	}
	defer os.RemoveAll(dir)
	conf, deferred := filepath.Join(dir, "config"), filepath.Join(dir, "deferred")
	for _, f := range []string{conf, deferred} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			release()
			return Dynamic{}, err
		}
	}
	argv := append(h.ClientConnect[:len(h.ClientConnect):len(h.ClientConnect)], conf)
	env := append(h.Env("client-connect", c), "client_connect_config_file="+conf, "client_connect_deferred_file="+deferred)
	err = Exec(ctx, argv, env, nil)
	release()
	if err != nil {
		return Dynamic{}, err
	}
	// The deferred file's first byte: "2" still pending, "0" refused,
	// "1" or nothing admitted (multi.c ccs_test_deferred_ret_file).
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(deferred)
		if len(b) == 0 || b[0] == '1' {
			break
		}
		if b[0] != '2' {
			return Dynamic{}, ErrRefused
		}
		select {
		case <-ctx.Done():
			return Dynamic{}, ErrTimeout
		case <-tick.C:
		}
	}
	data, err := os.ReadFile(conf)
	if err != nil {
		return Dynamic{}, err
	}
	d, err := ParseConfig(data)
	if err != nil {
		return Dynamic{}, errors.Join(ErrRefused, err)
	}
	for _, name := range d.Ignored {
		h.logf("client-connect: %q: option %s in the configuration file is not supported; ignored", c.CommonName, name)
	}
	return d, nil
}

// Disconnected queues client-disconnect for c with the session's byte
// totals.
func (h *Hooks) Disconnected(c *Client, rx, tx uint64, now time.Time) {
	if len(h.ClientDisconnect) == 0 {
		return
	}
	env := h.DisconnectEnv(c, rx, tx, now)
	h.submit(&h.Disconnect, c.Real.String(), func() {
		h.run(&h.Disconnect, "client-disconnect", c.CommonName, h.ClientDisconnect, env)
	})
}

// Learned queues learn-address OP ADDR [CN] (multi.c multi_learn_addr):
// op is "add", "update" or "delete"; delete carries no common name.
func (h *Hooks) Learned(op string, addr netip.Prefix, c *Client) {
	if len(h.LearnAddress) == 0 {
		return
	}
	a := addr.String()
	if addr.IsSingleIP() {
		a = addr.Addr().String()
	}
	argv := append(h.LearnAddress[:len(h.LearnAddress):len(h.LearnAddress)], op, a)
	if op != "delete" {
		argv = append(argv, c.CommonName)
	}
	env := h.Env("learn-address", c)
	h.submit(&h.Learn, a, func() { h.run(&h.Learn, "learn-address", c.CommonName, argv, env) })
}

func (h *Hooks) run(cnt *Counters, what, cn string, argv, env []string) {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout())
	defer cancel()
	start := time.Now()
	release, err := h.Runner.Acquire(ctx)
	if err == nil {
		err = Exec(ctx, argv, env, nil)
		release()
	}
	cnt.count(err)
	if err != nil {
		h.logf("%s for %q failed after %v: %s", what, cn, time.Since(start).Round(time.Millisecond), describe(err))
	}
}

// submit hands job to the worker for key; a full queue drops it.
func (h *Hooks) submit(cnt *Counters, key string, job func()) {
	h.once.Do(h.start)
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.stopped {
		cnt.Dropped.Add(1)
		return
	}
	w := h.workers[maphash.String(h.seed, key)%uint64(len(h.workers))]
	select {
	case w <- job:
	default:
		cnt.Dropped.Add(1)
		h.logf("hooks: queue full; a command for %s was dropped", key)
	}
}

func (h *Hooks) start() {
	n := 8
	if h.Runner != nil && h.Runner.Concurrency > 0 {
		n = min(h.Runner.Concurrency, 64)
	}
	h.seed = maphash.MakeSeed()
	h.workers = make([]chan func(), n)
	for i := range h.workers {
		ch := make(chan func(), queueDepth)
		h.workers[i] = ch
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for job := range ch {
				job()
			}
		}()
	}
}

// Close lets the queued commands run out and stops the workers, waiting
// at most one timeout so that a long backlog cannot hold up shutdown;
// later jobs are dropped. A second call does nothing.
func (h *Hooks) Close() {
	h.once.Do(h.start)
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	h.mu.Unlock()
	for _, w := range h.workers {
		close(w)
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(h.timeout()):
		h.logf("hooks: commands still queued at shutdown were abandoned")
	}
}
