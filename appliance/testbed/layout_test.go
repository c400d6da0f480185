// Package testbed holds what tests, evaluates and measures ovfwd: the namespace
// labs, benches, end-to-end suites, load generators and guest helpers. The
// product (config, fwd, vpn, mlx5, appliance outside this folder) never
// imports it; cmd/ovfwd does, for the `lab` and `bench` commands operators use
// to evaluate a box. This file enforces that and the package layering.
package testbed_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ovfwd/ovfwd"

// layering lists, per package prefix, the module packages it may not import
// (outside its own tests). A prefix matches the package and everything below.
var layering = []struct {
	pkg       string
	forbidden []string
}{
	{"fwd", []string{"config", "vpn", "mlx5", "appliance", "cmd"}},
	{"config", []string{"fwd", "vpn", "mlx5", "appliance", "cmd"}},
	{"vpn", []string{"mlx5", "appliance", "cmd", "config"}},
	// The key file format sits below both the control channel and the PKI
	// tool, which do not import each other.
	{"vpn/statickey", []string{"vpn", "fwd"}},
	{"vpn/pki", []string{"vpn/control"}},
	{"vpn/control", []string{"vpn/pki"}},
	{"mlx5", []string{"vpn", "appliance", "cmd", "config"}},
	{"appliance", []string{"appliance/testbed", "cmd"}},
	// The worker loop runs any engine over any ports: it knows only fwd.
	{"appliance/runner", []string{"appliance", "config", "vpn", "mlx5", "cmd"}},
}

// allowedTestbedImporters may import the testbed: the one binary, because
// `ovfwd lab` and `ovfwd bench` are commands of it, and the testbed itself.
var allowedTestbedImporters = []string{"cmd/ovfwd", "appliance/testbed"}

func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// violations returns one line per forbidden edge in graph (package -> its
// non-test imports, both relative to the module).
func violations(graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		for _, imp := range imports {
			if under(imp, "appliance/testbed") {
				ok := false
				for _, a := range allowedTestbedImporters {
					ok = ok || under(pkg, a)
				}
				if !ok {
					bad = append(bad, pkg+" imports the testbed package "+imp)
				}
			}
			for _, rule := range layering {
				if !under(pkg, rule.pkg) || under(pkg, "appliance/testbed") {
					continue
				}
				for _, f := range rule.forbidden {
					if under(imp, f) && !under(imp, rule.pkg) {
						bad = append(bad, pkg+" imports "+imp+" (a "+rule.pkg+" package must not import "+f+")")
					}
				}
			}
		}
	}
	return bad
}

func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module+"/")
		graph[pkg] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"/") {
				graph[pkg] = append(graph[pkg], strings.TrimPrefix(imp, module+"/"))
			}
		}
	}
	return graph
}

func TestImportGraph(t *testing.T) {
	graph := moduleGraph(t)
	if len(graph) < 20 {
		t.Fatalf("go list found only %d packages; the module layout changed?", len(graph))
	}
	for _, must := range []string{"fwd", "appliance/daemon", "appliance/testbed/lab", "cmd/ovfwd"} {
		if _, ok := graph[must]; !ok {
			t.Fatalf("package %s not in the module graph", must)
		}
	}
	for _, v := range violations(graph) {
		t.Error(v)
	}
}

// TestImportGraphCatches shows the checker is able to fail.
func TestImportGraphCatches(t *testing.T) {
	graph := map[string][]string{
		"appliance/daemon":      {"appliance/testbed/netns"},
		"fwd":                   {"vpn"},
		"fwd/lpm":               {"fwd", "appliance/afxdp"},
		"cmd/ovfwd":             {"appliance/testbed/lab"},
		"appliance/testbed/lab": {"appliance/daemon", "fwd"},
		"vpn/control":           {"vpn", "fwd", "vpn/statickey"},
		"vpn/pki":               {"vpn/control"},
	}
	got := violations(graph)
	if len(got) != 4 {
		t.Fatalf("want 4 violations (daemon→testbed, fwd→vpn, fwd/lpm→appliance, pki→control), got %d: %q", len(got), got)
	}
}
