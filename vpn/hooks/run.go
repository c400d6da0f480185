// Package hooks runs the operator's commands at client events the way
// openvpn runs its scripts (doc/man-sections/script-options.rst):
// client-connect, client-disconnect and learn-address, with openvpn's
// environment variable names and arguments, and client-connect's dynamic
// configuration file. Commands run outside the packet path, at most
// Concurrency at once, each bounded by a timeout; failures are counted.
package hooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// ErrTimeout is a command that did not finish (queueing included) in time.
var ErrTimeout = errors.New("timed out")

// Runner bounds commands: at most Concurrency run at once, and waiting
// for a slot counts against a command's timeout. The zero Runner allows
// 64 at once.
type Runner struct {
	Concurrency int

	once  sync.Once
	slots chan struct{}
}

// Acquire takes a slot; release must follow. It fails when ctx ends first.
func (r *Runner) Acquire(ctx context.Context) (release func(), err error) {
	r.once.Do(func() {
		n := r.Concurrency
		if n <= 0 {
			n = 64
		}
		r.slots = make(chan struct{}, n)
	})
	select {
	case r.slots <- struct{}{}:
		return func() { <-r.slots }, nil
	case <-ctx.Done():
		return nil, ErrTimeout
	}
}

// Exec runs argv with exactly env as its environment; ctx bounds it
// (the caller holds a slot). stdout, if not nil, takes the command's
// standard output. A non-zero exit is an *exec.ExitError.
func Exec(ctx context.Context, argv, env []string, stdout io.Writer) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout = stdout
	// A child that keeps stdout open must not hold Wait past the kill.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return ErrTimeout
	}
	return err
}

// Counters are a Hooks' totals since start, by script type.
type Counters struct {
	Run, Failed, TimedOut, Dropped atomic.Uint64
}

// Failures are the counters of commands that did not succeed, by
// prefix_failed, prefix_timed_out and prefix_dropped.
func (c *Counters) Failures(prefix string) map[string]uint64 {
	return map[string]uint64{
		prefix + "_failed": c.Failed.Load(), prefix + "_timed_out": c.TimedOut.Load(), prefix + "_dropped": c.Dropped.Load(),
	}
}

func (c *Counters) count(err error) {
	c.Run.Add(1)
	switch {
	case errors.Is(err, ErrTimeout):
		c.TimedOut.Add(1)
	case err != nil:
		c.Failed.Add(1)
	}
}

// describe is err for a log line: an exit status or a timeout.
func describe(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	return err.Error()
}
