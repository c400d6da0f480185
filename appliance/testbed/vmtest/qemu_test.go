package vmtest

import (
	"os"
	"os/exec"
	"regexp"
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

// TestScriptStepCountsEveryCommand runs appliance.sh's step and not
// helpers in bash: a step function under set -e fails on any failing
// command, not only its last. (bash ignores set -e in a function an if
// condition calls; step ran its command that way and passed such steps.)
func TestScriptStepCountsEveryCommand(t *testing.T) {
	b, err := os.ReadFile("testdata/appliance.sh")
	if err != nil {
		t.Fatal(err)
	}
	var defs []string
	for _, re := range []string{`(?ms)^step\(\) \{.*?^\}$`, `(?m)^not\(\) .*$`} {
		d := regexp.MustCompile(re).FindString(string(b))
		if d == "" {
			t.Fatalf("appliance.sh has no %s", re)
		}
		defs = append(defs, d)
	}
	script := strings.Join(defs, "\n") + `
early() { set -e; false; echo after; }
inverted() { set -e; not true; echo after; }
fine() { set -e; true; not false; }
step early early
step inverted inverted
step fine fine
`
	out, err := exec.Command("bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	steps, _ := ParseSteps(string(out))
	want := map[string]bool{"early": false, "inverted": false, "fine": true}
	if len(steps) != len(want) {
		t.Fatalf("steps %+v from:\n%s", steps, out)
	}
	for _, s := range steps {
		if s.OK != want[s.Name] {
			t.Errorf("step %s ok=%v, want %v:\n%s", s.Name, s.OK, want[s.Name], out)
		}
	}
}

func FuzzParseVirtioReport(f *testing.F) {
	f.Add("FACT a.b true\nFACT a.b x y\nSTATUS t {\"ready\": true}\nSTATUS u {\n")
	f.Add("STATUS  \nFACT \nFACT k\r\n")
	f.Fuzz(func(t *testing.T, out string) {
		r, errs := parseVirtioReport(out)
		statuses := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimRight(l, "\r"), "STATUS ") {
				statuses++
			}
		}
		if len(r.snaps)+len(errs) > statuses {
			t.Fatalf("%d snapshots and %d errors from %d STATUS lines", len(r.snaps), len(errs), statuses)
		}
		for k := range r.facts {
			if strings.ContainsAny(k, " \n") {
				t.Fatalf("fact key %q", k)
			}
		}
	})
}
