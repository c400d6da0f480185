package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Packet-driven events (a neighbour storm, spoofed handshakes) can log a
// line per packet. rateLog passes the first logBurst lines of each message
// per logWindow and counts the rest; when the window ends, one line says
// how many were suppressed. The key is the message, or the format a
// printf-style caller put in the context (logKey), so lines that differ
// only in their addresses share one budget.
const (
	logWindow = 10 * time.Second
	logBurst  = 10
)

type logKeyType struct{}

// logKey is the context key of a line's rate-limit key.
var logKey logKeyType

type rateLog struct {
	next slog.Handler
	st   *rateState
}

type rateState struct {
	mu   sync.Mutex
	now  func() time.Time
	keys map[string]*rateKey
}

type rateKey struct {
	start      time.Time
	n          int
	suppressed int
	level      slog.Level
}

func newRateLog(next slog.Handler) *rateLog {
	return &rateLog{next: next, st: &rateState{now: time.Now, keys: map[string]*rateKey{}}}
}

func (h *rateLog) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *rateLog) Handle(ctx context.Context, r slog.Record) error {
	key := r.Message
	if k, ok := ctx.Value(logKey).(string); ok {
		key = k
	}
	st := h.st
	st.mu.Lock()
	now := st.now()
	k := st.keys[key]
	var summary *slog.Record
	if k == nil {
		k = &rateKey{start: now}
		st.keys[key] = k
	} else if now.Sub(k.start) >= logWindow {
		summary = k.summary(key, now)
		*k = rateKey{start: now}
	}
	k.n++
	pass := k.n <= logBurst
	if !pass {
		k.suppressed++
		k.level = max(k.level, r.Level)
	}
	st.mu.Unlock()
	if summary != nil {
		_ = h.next.Handle(ctx, *summary)
	}
	if !pass {
		return nil
	}
	return h.next.Handle(ctx, r)
}

// flush reports the windows that ended with lines suppressed and forgets
// keys idle for a window (the control loop calls it).
func (h *rateLog) flush() {
	st := h.st
	var out []slog.Record
	st.mu.Lock()
	now := st.now()
	for key, k := range st.keys {
		if now.Sub(k.start) < logWindow {
			continue
		}
		if s := k.summary(key, now); s != nil {
			out = append(out, *s)
		}
		delete(st.keys, key)
	}
	st.mu.Unlock()
	for _, r := range out {
		_ = h.next.Handle(context.Background(), r)
	}
}

func (k *rateKey) summary(key string, now time.Time) *slog.Record {
	if k.suppressed == 0 {
		return nil
	}
	r := slog.NewRecord(now, k.level, "repeated log lines suppressed", 0)
	r.AddAttrs(slog.String("line", key), slog.Int("suppressed", k.suppressed),
		slog.Duration("interval", now.Sub(k.start).Round(time.Second)))
	return &r
}

func (h *rateLog) WithAttrs(a []slog.Attr) slog.Handler {
	return &rateLog{next: h.next.WithAttrs(a), st: h.st}
}

func (h *rateLog) WithGroup(n string) slog.Handler {
	return &rateLog{next: h.next.WithGroup(n), st: h.st}
}
