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
	out   io.Writer
	level slog.LevelVar
	h     atomic.Pointer[slog.Handler]
}

func newLogSwitch(out io.Writer, c config.Log) *logSwitch {
	s := &logSwitch{out: out}
	s.apply(c)
	return s
}

func (s *logSwitch) apply(c config.Log) {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(c.Level)) // config validated the name
	s.level.Set(lv)
	o := &slog.HandlerOptions{Level: &s.level}
	var h slog.Handler = slog.NewTextHandler(s.out, o)
	if c.Format == "json" {
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
