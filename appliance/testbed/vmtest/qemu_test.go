package vmtest

import "testing"

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
