package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"github.com/ovfwd/ovfwd/config"
	"golang.org/x/sys/unix"
)

// A kernel that refuses the fast path's maps leaves the fast path off (the
// workers forward everything) instead of failing the start, and the log
// says why.
func TestFastPathMapsRefused(t *testing.T) {
	orig := newFastMaps
	newFastMaps = func() (*afxdp.FastPath, error) { return nil, unix.EPERM }
	t.Cleanup(func() { newFastMaps = orig })
	for _, mode := range []string{config.FastPathAuto, config.FastPathXDP} {
		var out bytes.Buffer
		fp, err := newFastPath(config.Appliance{Mode: config.ModeRouter, FastPath: mode}, slog.New(slog.NewTextHandler(&out, nil)))
		if fp != nil || err != nil {
			t.Errorf("fast_path = %s: %v, %v; want no fast path and no error", mode, fp, err)
		}
		if s := out.String(); !strings.Contains(s, "the kernel refused its maps") || !strings.Contains(s, "operation not permitted") {
			t.Errorf("fast_path = %s: the log does not say why the fast path is off:\n%s", mode, s)
		}
	}
}
