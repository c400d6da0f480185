package config

import (
	"testing"
)

func TestLineIndex(t *testing.T) {
	src := `# comment [not] = a table
top = 1 # trailing
s = "a # not a comment \" [x]"
ml = """
[not.a.table]
x = 1 """
lit = '''
'''
dt = 1979-05-27 07:32:00Z
[a]
"quoted.key" = 1
'lit' = 2
b.c = 3
arr = [
  1,
  [2, 3],
  { k = 4 },
]
inl = { x = 1,
  y = { z = 2 } }

[[p]]
n = 1
[p.sub]
v = 1
[[p]]
n = 2
[[p.q]]
w = 1
[[p.q]]
w = 2
[p.sub]
v = 2
`
	ix := indexLines([]byte(src))
	want := map[string]int{
		"top":          2,
		"s":            3,
		"ml":           4,
		"lit":          7,
		"dt":           9,
		"a":            10,
		"a.quoted.key": 11,
		"a.lit":        12,
		"a.b":          13,
		"a.b.c":        13,
		"a.arr":        14,
		"a.arr[0]":     15,
		"a.arr[1]":     16,
		"a.arr[1][1]":  16,
		"a.arr[2].k":   17,
		"a.inl.x":      19,
		"a.inl.y.z":    20,
		"p":            22,
		"p[0]":         22,
		"p[0].n":       23,
		"p[0].sub.v":   25,
		"p[1]":         26,
		"p[1].n":       27,
		"p[1].q[0].w":  29,
		"p[1].q[1]":    30,
		"p[1].q[1].w":  31,
		"p[1].sub":     32,
		"p[1].sub.v":   33,
	}
	for k, line := range want {
		if got := ix[k]; got != line {
			t.Errorf("%s: line %d, want %d", k, got, line)
		}
	}
	for _, k := range []string{"not.a.table", "x", "not", "p[0].q"} {
		if _, ok := ix[k]; ok {
			t.Errorf("indexed %q, which is not a key", k)
		}
	}
	if got := ix.lookup("a.arr[2].missing"); got != 17 {
		t.Errorf("lookup falls back to the parent: got %d, want 17", got)
	}
	if got := ix.lookup("nowhere"); got != 0 {
		t.Errorf("lookup of an unknown root: %d", got)
	}
}

func TestLineIndexBOMAndCRLF(t *testing.T) {
	ix := indexLines([]byte("\xef\xbb\xbfa = 1\r\n[t]\r\nb = [\r\n 1,\r\n 2]\r\n"))
	for k, want := range map[string]int{"a": 1, "t": 2, "t.b": 3, "t.b[1]": 5} {
		if ix[k] != want {
			t.Errorf("%s: line %d, want %d", k, ix[k], want)
		}
	}
}
