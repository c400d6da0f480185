package control

import (
	"strings"
	"testing"
)

// FuzzAuthGroup: whatever a command prints, the group is "" or one
// printable word of at most 64 bytes that appeared on a "group " line.
func FuzzAuthGroup(f *testing.F) {
	f.Add([]byte("group staff\n"))
	f.Add([]byte("x\r\ngroup a\r\ngroup b"))
	f.Add([]byte("group \x00\ngroup two words\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		g := authGroup(out)
		if g == "" {
			return
		}
		if len(g) > 64 || strings.ContainsFunc(g, func(r rune) bool { return isControl(r) || r == ' ' }) {
			t.Fatalf("group %q", g)
		}
		if !strings.Contains(string(out), g) {
			t.Fatalf("group %q is not in the output", g)
		}
	})
}
