package fwd

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The routed path's small helpers are written to fit the compiler's
// inlining budget: a call in their place costs the spills of everything
// live across it, per packet (docs/benchmarks.md). An edit that pushes one
// over the budget keeps every test green and quietly slows the router;
// this test names it.
func TestHotHelpersInline(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	var out []byte
	for _, pkg := range []string{".", "./csum"} {
		o, err := exec.Command(goBin, "build", "-o", "/dev/null", "-gcflags=-m", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go build -gcflags=-m %s: %v\n%s", pkg, err, o)
		}
		out = append(out, o...)
	}
	for _, f := range []string{
		"ip4Hdr", "ip6Hdr", "decHop", "ipv4MinHeaderSumOK", "sameMAC",
		"AddrSum4", "AddrSum6", "FoldPseudo", "Fold16", "Fold", "Diff32", "Diff16", "FixDiff", "Fix16",
		"(*Worker).cachedNeigh", "(*neighbour).ready", "key4Words", "wordsOf",
	} {
		if !strings.Contains(string(out), ": can inline "+f+" ") && !strings.Contains(string(out), ": can inline "+f+"\n") {
			t.Errorf("%s is no longer inlined", f)
		}
	}
}
