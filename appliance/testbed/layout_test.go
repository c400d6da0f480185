// Package testbed holds what tests, evaluates and measures ovfwd: the namespace
// labs, benches, end-to-end suites, load generators and guest helpers. The
// product (config, fwd, vpn, mlx5, appliance outside this folder) never
// imports it; cmd/ovfwd does, for the `lab` and `bench` commands operators use
// to evaluate a box. This file enforces that, the package layering, and that
// the binary links no test machinery.
package testbed_test

import (
	"os/exec"
	"slices"
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

// deviceModel is the mlx5 device model: the binary links it for `ovfwd lab`,
// `ovfwd bench` and `driver = "mlx5-sim"`, but the daemon does not.
const deviceModel = "mlx5/model"

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

// deps lists the packages pkg links (go list -deps: non-test imports,
// transitively), the standard library's by import path and the module's
// relative to it.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+"/"+pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var list []string
	for _, p := range strings.Fields(string(out)) {
		list = append(list, strings.TrimPrefix(p, module+"/"))
	}
	return list
}

// testMachinery returns what in deps a shipped program must not link: the
// testing package (and its internals), or a mlx5 device model when
// noModel.
func testMachinery(deps []string, noModel bool) []string {
	var bad []string
	for _, p := range deps {
		if under(p, "testing") || noModel && under(p, deviceModel) {
			bad = append(bad, p)
		}
	}
	return bad
}

// TestProductLinks holds what the shipped binary carries: no testing
// package (test helpers live in _test files and the testbed's *test
// packages), and a daemon without the mlx5 device model (registered by
// cmd/ovfwd).
func TestProductLinks(t *testing.T) {
	bin := deps(t, "cmd/ovfwd")
	if !slices.Contains(bin, "appliance/daemon") || !slices.Contains(bin, "runtime") {
		t.Fatalf("go list -deps cmd/ovfwd lists %d packages, without the daemon or the runtime", len(bin))
	}
	for _, p := range testMachinery(bin, false) {
		t.Errorf("the ovfwd binary links %s", p)
	}
	daemon := deps(t, "appliance/daemon")
	if !slices.Contains(daemon, "mlx5") {
		t.Fatalf("go list -deps appliance/daemon lists %d packages, without mlx5", len(daemon))
	}
	for _, p := range testMachinery(daemon, true) {
		t.Errorf("the daemon links %s", p)
	}
}

// TestTestingOnlyInTestPackages: outside _test.go files only the testbed's
// test-helper packages (named …test, imported by tests alone) import the
// testing package.
func TestTestingOnlyInTestPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module+"/")
		if slices.Contains(f[1:], "testing") && !(under(pkg, "appliance/testbed") && strings.HasSuffix(pkg, "test")) {
			t.Errorf("%s imports testing outside its tests", pkg)
		}
	}
}

// TestProductLinksCatches shows the check is able to fail.
func TestProductLinksCatches(t *testing.T) {
	got := testMachinery([]string{"fmt", "testing", "testing/internal/testdeps", "mlx5", "mlx5/model/fullsim", "mlx5/modelnot"}, true)
	if want := []string{"testing", "testing/internal/testdeps", "mlx5/model/fullsim"}; !slices.Equal(got, want) {
		t.Errorf("flagged %q, want %q", got, want)
	}
	if got := testMachinery([]string{"mlx5/model/fullsim", "testing"}, false); !slices.Equal(got, []string{"testing"}) {
		t.Errorf("without noModel flagged %q", got)
	}
}
