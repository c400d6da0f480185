package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// stderrIsJournal reports whether stderr is the systemd journal's stream:
// systemd sets JOURNAL_STREAM to that stream's "device:inode", and a
// process compares it with its own stderr's, so output redirected
// elsewhere is not prefixed (systemd.exec(5), JOURNAL_STREAM).
func stderrIsJournal() bool {
	want := os.Getenv("JOURNAL_STREAM")
	if want == "" {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		return false
	}
	return want == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// syslogPriority is the priority journald reads from a line's "<N>"
// prefix (sd-daemon(3): SD_ERR is <3>, SD_WARNING <4>, SD_INFO <6>,
// SD_DEBUG <7>), so `journalctl -p warning` shows warnings and errors.
func syslogPriority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	default:
		return 7
	}
}

// journalHandler prefixes each record with its syslog priority. The
// prefix has to be in the same write as the line, so each record is
// formatted into its own buffer by a handler built for it; the attributes
// and groups bound to this handler are replayed onto that one. Logging is
// not on the packet path; the allocation per line does not matter.
type journalHandler struct {
	out  io.Writer
	mu   *sync.Mutex
	opts *slog.HandlerOptions
	json bool
	with []func(slog.Handler) slog.Handler
}

func newJournalHandler(out io.Writer, opts *slog.HandlerOptions, json bool) *journalHandler {
	return &journalHandler{out: out, mu: new(sync.Mutex), opts: opts, json: json}
}

func (j *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= j.opts.Level.Level()
}

func (j *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "<%d>", syslogPriority(r.Level))
	var h slog.Handler = slog.NewTextHandler(&buf, j.opts)
	if j.json {
		h = slog.NewJSONHandler(&buf, j.opts)
	}
	for _, w := range j.with {
		h = w(h)
	}
	if err := h.Handle(ctx, r); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, err := j.out.Write(buf.Bytes())
	return err
}

func (j *journalHandler) derive(w func(slog.Handler) slog.Handler) *journalHandler {
	n := *j
	n.with = append(append([]func(slog.Handler) slog.Handler(nil), j.with...), w)
	return &n
}

func (j *journalHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return j.derive(func(h slog.Handler) slog.Handler { return h.WithAttrs(a) })
}

func (j *journalHandler) WithGroup(name string) slog.Handler {
	return j.derive(func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}
