package export

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// TestExportInstallWithdrawPurge runs the exporter in a namespace of its
// own: a crashed run's routes (same protocol) are removed at Open, another
// protocol's routes in the same table are left alone, Set installs and
// withdraws blackhole routes with the configured table, protocol and
// metric, and Close withdraws everything.
func TestExportInstallWithdrawPurge(t *testing.T) {
	ns := nstest.New(t, "exp")
	// A crashed run's exports, and a route someone else put in the table.
	nstest.Run(t, ns, "ip", "route", "add", "blackhole", "198.18.170.0/24", "table", "200", "proto", "201")
	nstest.Run(t, ns, "ip", "-6", "route", "add", "blackhole", "2001:db8:170::/64", "table", "200", "proto", "201")
	nstest.Run(t, ns, "ip", "route", "add", "blackhole", "198.18.171.0/24", "table", "200", "proto", "static")

	show := func() string {
		t.Helper()
		return nstest.Run(t, ns, "ip", "route", "show", "table", "200") + nstest.Run(t, ns, "ip", "-6", "route", "show", "table", "200")
	}
	var e *Exporter
	var purged int
	if err := ns.Do(func() (err error) {
		e, purged, err = Open(Options{Device: "ovfwd-exp-t", Table: 200, Protocol: 201, Metric: 7})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if purged != 2 {
		t.Errorf("purged %d stale routes, want 2", purged)
	}
	got := show()
	if strings.Contains(got, "198.18.170.0") || strings.Contains(got, "2001:db8:170::") || !strings.Contains(got, "198.18.171.0/24 proto static") {
		t.Fatalf("after Open, table 200:\n%s", got)
	}

	pool4, pool6 := netip.MustParsePrefix("198.18.172.0/24"), netip.MustParsePrefix("2001:db8:172::/64")
	iroute := netip.MustParsePrefix("198.18.173.0/24")
	if err := e.Set([]netip.Prefix{pool4, pool6, iroute}); err != nil {
		t.Fatal(err)
	}
	got = show()
	for _, want := range []string{"198.18.172.0/24 dev ovfwd-exp-t proto 201 scope link metric 7", "198.18.173.0/24 dev ovfwd-exp-t proto 201 scope link metric 7",
		"2001:db8:172::/64 dev ovfwd-exp-t proto 201 metric 7"} {
		if !strings.Contains(got, want) {
			t.Errorf("table 200 lacks %q:\n%s", want, got)
		}
	}
	if main := nstest.Run(t, ns, "ip", "route", "show"); strings.Contains(main, "198.18.172") {
		t.Errorf("exported route in the main table:\n%s", main)
	}
	if err := e.Set([]netip.Prefix{pool4, pool6}); err != nil {
		t.Fatal(err)
	}
	if got = show(); strings.Contains(got, "198.18.173.0") || !strings.Contains(got, "198.18.172.0/24") {
		t.Errorf("after withdrawing the iroute:\n%s", got)
	}
	if n := len(e.Installed()); n != 2 {
		t.Errorf("Installed() = %v", e.Installed())
	}
	// Someone deletes an exported route behind our back: Set of the same
	// set does not notice (it keeps its own view), but a withdrawal of a
	// route already gone is no error.
	nstest.Run(t, ns, "ip", "-6", "route", "del", "2001:db8:172::/64", "table", "200", "proto", "201")
	if err := e.Set([]netip.Prefix{pool4}); err != nil {
		t.Errorf("withdrawing a route already gone: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got = show(); strings.Contains(got, "proto 201") || !strings.Contains(got, "198.18.171.0/24") {
		t.Errorf("after Close:\n%s", got)
	}
	if _, err := ns.Run("ip", "link", "show", "ovfwd-exp-t"); err == nil {
		t.Error("the device outlived Close")
	}
	if err := e.Set([]netip.Prefix{pool4}); err == nil {
		t.Error("Set after Close succeeded")
	}
}

// TestExportGoneWithProcess: a process that dies without a word (SIGKILL)
// takes its exported routes with it: the device is not persistent, so the
// kernel removes it and every route through it.
func TestExportGoneWithProcess(t *testing.T) {
	if os.Getenv("OVFWD_EXPORT_CHILD") != "" {
		e, _, err := Open(Options{Device: "ovfwd-exp-t", Table: 200, Protocol: 201})
		if err == nil {
			err = e.Set([]netip.Prefix{netip.MustParsePrefix("198.18.174.0/24"), netip.MustParsePrefix("2001:db8:174::/64")})
		}
		fmt.Println("exported", err)
		time.Sleep(time.Minute)
		return
	}
	ns := nstest.New(t, "exp")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns.Name, self, "-test.run=^TestExportGoneWithProcess$")
	cmd.Env = append(os.Environ(), "OVFWD_EXPORT_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "exported <nil>\n" {
		t.Fatalf("child: %q", line)
	}
	if got := nstest.Run(t, ns, "ip", "route", "show", "table", "200"); !strings.Contains(got, "198.18.174.0/24 dev ovfwd-exp-t") {
		t.Fatalf("child's route missing:\n%s", got)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	var got string
	for i := 0; i < 50; i++ {
		got = nstest.Run(t, ns, "ip", "route", "show", "table", "200") + nstest.Run(t, ns, "ip", "-6", "route", "show", "table", "200")
		if got == "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got != "" {
		t.Errorf("routes outlived the process:\n%s", got)
	}
	if _, err := ns.Run("ip", "link", "show", "ovfwd-exp-t"); err == nil {
		t.Error("the device outlived the process")
	}
}
