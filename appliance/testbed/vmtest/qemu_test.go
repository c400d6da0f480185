package vmtest

import (
	"strings"
	"testing"
)

func TestParseSteps(t *testing.T) {
	steps, other := ParseSteps("VMTEST start\nSTEP a: b: ok x: ok y\nSTEP c: FAIL why\n  | stack\nSTEP d: ok\n")
	want := []Step{{"a: b", "x: ok y", true}, {"c", "why", false}, {"d", "", true}}
	if len(steps) != len(want) {
		t.Fatalf("steps %+v", steps)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d = %+v, want %+v", i, steps[i], want[i])
		}
	}
	if len(other) != 3 { // "VMTEST start", the stack line, the empty last line
		t.Errorf("other lines %q", other)
	}
}

func FuzzParseSteps(f *testing.F) {
	f.Add("STEP a: ok\nSTEP b: c: FAIL d\n")
	f.Add("STEP : ok\r\nSTEP x: okay\n")
	f.Fuzz(func(t *testing.T, out string) {
		steps, other := ParseSteps(out)
		lines := strings.Count(out, "\n") + 1
		if len(steps)+len(other) != lines {
			t.Fatalf("%d steps + %d other lines from %d lines", len(steps), len(other), lines)
		}
		for _, s := range steps {
			if strings.Contains(s.Name, "\n") {
				t.Fatalf("step name %q spans lines", s.Name)
			}
		}
	})
}
