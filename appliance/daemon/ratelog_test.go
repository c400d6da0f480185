package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A storm of one log line (a neighbour storm pinning, a handshake flood)
// costs logBurst lines and one summary per window, not a line per packet;
// printf-style lines that differ only in their arguments share a key.
func TestRateLogSummarises(t *testing.T) {
	var out bytes.Buffer
	h := newRateLog(slog.NewTextHandler(&out, nil))
	now := time.Unix(1_700_000_000, 0)
	h.st.now = func() time.Time { return now }
	log := slog.New(h)
	for i := range 600 {
		log.Info("neighbour pinned from the kernel", "addr", i)
		ctx := context.WithValue(context.Background(), logKey, "control: %s: session created")
		log.InfoContext(ctx, fmt.Sprintf("control: 198.18.0.%d:1194: session created", i%250))
		now = now.Add(10 * time.Millisecond) // 6 s in all
	}
	log.Info("something else")
	if n := strings.Count(out.String(), "\n"); n != 2*logBurst+1 {
		t.Fatalf("%d lines during the storm, want %d:\n%s", n, 2*logBurst+1, out.String())
	}
	now = now.Add(logWindow)
	h.flush()
	got := out.String()
	for _, want := range []string{
		`msg="repeated log lines suppressed" line="neighbour pinned from the kernel" suppressed=590`,
		`msg="repeated log lines suppressed" line="control: %s: session created" suppressed=590`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	// The next window starts afresh.
	out.Reset()
	log.Info("neighbour pinned from the kernel", "addr", 1)
	if !strings.Contains(out.String(), "neighbour pinned") {
		t.Errorf("the line is still suppressed after its window: %q", out.String())
	}
}
