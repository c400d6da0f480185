package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/ovfwd/ovfwd/config"
)

// logSwitch is a slog.Handler whose level and format a reload can change
// while every logger derived from it keeps working.
type logSwitch struct {
	out     io.Writer
	journal bool // out is the journal's stream: lines carry their priority
	level   slog.LevelVar
	h       atomic.Pointer[slog.Handler]
}

func newLogSwitch(out io.Writer, journal bool, c config.Log) *logSwitch {
	s := &logSwitch{out: out, journal: journal}
	s.apply(c)
	return s
}

func (s *logSwitch) apply(c config.Log) {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(c.Level)) // config validated the name
	s.level.Set(lv)
	o := &slog.HandlerOptions{Level: &s.level}
	var h slog.Handler = slog.NewTextHandler(s.out, o)
	switch {
	case s.journal:
		h = newJournalHandler(s.out, o, c.Format == "json")
	case c.Format == "json":
		h = slog.NewJSONHandler(s.out, o)
	}
	s.h.Store(&h)
}

func (s *logSwitch) Enabled(ctx context.Context, l slog.Level) bool {
	return (*s.h.Load()).Enabled(ctx, l)
}
func (s *logSwitch) Handle(ctx context.Context, r slog.Record) error {
	return (*s.h.Load()).Handle(ctx, r)
}

// WithAttrs and WithGroup bind to the current handler: the daemon derives
// no loggers that outlive a reload, and status lines do not need it.
func (s *logSwitch) WithAttrs(a []slog.Attr) slog.Handler { return (*s.h.Load()).WithAttrs(a) }
func (s *logSwitch) WithGroup(n string) slog.Handler      { return (*s.h.Load()).WithGroup(n) }

// vpnEvent logs what the VPN control plane reports for operators to alert
// on, as "event=NAME src=ADDR:PORT cn=… …": the event and the client's
// address come first and in that order, so a fail2ban filter anchors on
// them and a username or reason the client chose cannot pose as either.
// A refused login, a revoked certificate are warnings (journalctl -p
// warning); an operator's kill is information.
func (d *daemon) vpnEvent(event string, kv ...any) {
	level, msg := slog.LevelInfo, "vpn "+event
	switch event {
	case "auth_failed":
		level, msg = slog.LevelWarn, "vpn auth failed"
	case "revoked":
		level, msg = slog.LevelWarn, "vpn certificate revoked"
	case "killed":
		msg = "vpn client killed"
	}
	d.log.Log(context.Background(), level, msg, append([]any{"event", event}, kv...)...)
}
