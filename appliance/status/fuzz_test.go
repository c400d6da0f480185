package status

import (
	"strings"
	"testing"
)

// FuzzParseRequest: any line parses to one of the operations or an error,
// never panics, and a parsed request written back as a line parses to
// itself.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{"", "status", "kill alice", "kill 198.18.0.2:1194 halt", "kill x restart",
		"drain", "drain 10m", "drain cancel", "drain -1s", "drain 1h 2h", "kill", "status now", "\tkill\x00 a\u00a0b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := ParseRequest(line)
		if err != nil {
			return
		}
		var again string
		switch r.Op {
		case OpStatus:
			again = OpStatus
		case OpKill:
			if r.Target == "" || strings.ContainsAny(r.Target, " \t\n\r\v\f") {
				t.Fatalf("%q: kill target %q", line, r.Target)
			}
			again = OpKill + " " + r.Target
			if r.Halt {
				again += " halt"
			}
		case OpDrain:
			again = strings.TrimSpace(OpDrain + " " + r.Target)
		default:
			t.Fatalf("%q: operation %q", line, r.Op)
		}
		if r2, err := ParseRequest(again); err != nil || r2 != r {
			t.Fatalf("%q parsed to %+v, written back as %q: %+v %v", line, r, again, r2, err)
		}
	})
}

// FuzzParseDrain: a drain request's argument is a positive deadline,
// cancel, or an error.
func FuzzParseDrain(f *testing.F) {
	for _, s := range []string{"", "cancel", "10m", "0s", "-5m", "1h30m", "9223372036854775807ns", "cancel cancel"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		r, err := parseDrain(strings.Fields(args))
		if err != nil {
			return
		}
		if r.Op != OpDrain {
			t.Fatalf("%q: operation %q", args, r.Op)
		}
		switch r.Target {
		case "", DrainCancel:
			if r.DrainDeadline() != 0 {
				t.Fatalf("%q: deadline %v without one given", args, r.DrainDeadline())
			}
		default:
			if r.DrainDeadline() <= 0 {
				t.Fatalf("%q: accepted with deadline %v", args, r.DrainDeadline())
			}
		}
	})
}
