package mgmt

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// historySize is how many log lines and states a History keeps for "log
// N|all" and "state N|all" (openvpn's management-log-cache default).
const historySize = 250

// entry is one log line or state change.
type entry struct {
	at   time.Time
	text string // "FLAGS,message" for a log line, "STATE,desc,local,…" for a state
}

// ring keeps the newest historySize entries.
type ring struct {
	e    [historySize]entry
	next int
	n    int
}

func (r *ring) add(e entry) {
	r.e[r.next] = e
	r.next = (r.next + 1) % historySize
	r.n = min(r.n+1, historySize)
}

// last returns up to n entries, oldest first (n <= 0: all).
func (r *ring) last(n int) []entry {
	if n <= 0 || n > r.n {
		n = r.n
	}
	out := make([]entry, 0, n)
	for i := r.n - n; i < r.n; i++ {
		out = append(out, r.e[(r.next-r.n+i+historySize)%historySize])
	}
	return out
}

// History keeps the daemon's recent log lines and states for the
// management interface and passes each new one to the connections that
// asked for it in real time ("log on", "state on"). Passing never blocks
// the logging goroutine: a connection's outbox drops what it has no room
// for.
type History struct {
	mu     sync.Mutex
	log    ring
	state  ring
	subLog map[*conn]bool
	subSt  map[*conn]bool
}

// NewHistory makes an empty history.
func NewHistory() *History {
	return &History{subLog: map[*conn]bool{}, subSt: map[*conn]bool{}}
}

// Handler is a slog.Handler that records what next handles into h.
func (h *History) Handler(next slog.Handler) slog.Handler { return &logTee{next: next, h: h} }

// SetState records a state change, as openvpn's management_set_state:
// name is CONNECTED, EXITING, …; local4/local6 the server's tunnel
// addresses.
func (h *History) SetState(at time.Time, name, desc, local4, local6 string) {
	// log_entry_print with LOG_PRINT_STATE|LOCAL_IP|REMOTE_IP: state,
	// description, local IPv4, remote address and port (",," when
	// undefined), local address and port (",,"), then the local IPv6 if
	// set.
	text := name + "," + desc + "," + local4 + ",,,,"
	if local6 != "" {
		text += "," + local6
	}
	h.add(&h.state, h.subSt, entry{at, text}, ">STATE:")
}

func (h *History) add(r *ring, subs map[*conn]bool, e entry, prefix string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.add(e)
	if len(subs) == 0 {
		return
	}
	line := []byte(prefix + formatEntry(e) + "\r\n")
	for c := range subs {
		c.out.notify(line)
	}
}

func formatEntry(e entry) string { return strconv.FormatInt(e.at.Unix(), 10) + "," + e.text }

// subscribe turns real-time log or state lines on or off for c.
func (h *History) subscribe(c *conn, state, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subLog
	if state {
		m = h.subSt
	}
	if on {
		m[c] = true
	} else {
		delete(m, c)
	}
}

func (h *History) unsubscribeAll(c *conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subLog, c)
	delete(h.subSt, c)
}

func (h *History) lastLog(n int) []entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.log.last(n)
}

func (h *History) lastState(n int) []entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state.last(n)
}

// logTee passes records on to next and records them.
type logTee struct {
	next  slog.Handler
	h     *History
	attrs string // attributes bound by WithAttrs, formatted
	group string
}

func (t *logTee) Enabled(ctx context.Context, l slog.Level) bool { return t.next.Enabled(ctx, l) }

func (t *logTee) Handle(ctx context.Context, r slog.Record) error {
	err := t.next.Handle(ctx, r)
	var b strings.Builder
	b.WriteString(levelFlags(r.Level))
	b.WriteByte(',')
	b.WriteString(oneLine(r.Message))
	b.WriteString(t.attrs)
	r.Attrs(func(a slog.Attr) bool {
		appendAttr(&b, t.group, a)
		return true
	})
	t.h.add(&t.h.log, t.h.subLog, entry{r.Time, b.String()}, ">LOG:")
	return err
}

func (t *logTee) WithAttrs(as []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(t.attrs)
	for _, a := range as {
		appendAttr(&b, t.group, a)
	}
	return &logTee{next: t.next.WithAttrs(as), h: t.h, attrs: b.String(), group: t.group}
}

func (t *logTee) WithGroup(name string) slog.Handler {
	g := name
	if t.group != "" {
		g = t.group + "." + name
	}
	return &logTee{next: t.next.WithGroup(name), h: t.h, attrs: t.attrs, group: g}
}

// levelFlags is openvpn's msg_flags_string for a level: I(nfo),
// W(arning), N(on-fatal error), D(ebug).
func levelFlags(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "N"
	case l >= slog.LevelWarn:
		return "W"
	case l >= slog.LevelInfo:
		return "I"
	}
	return "D"
}

func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	if a.Equal(slog.Attr{}) {
		return
	}
	b.WriteByte(' ')
	if group != "" {
		b.WriteString(group + ".")
	}
	b.WriteString(a.Key)
	b.WriteByte('=')
	b.WriteString(oneLine(a.Value.Resolve().String()))
}

// oneLine keeps a log line on one management line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}
