package vmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
	"github.com/ovfwd/ovfwd/packaging"
)

// virtioQueues is the queue pairs of every virtio NIC of the guest.
const virtioQueues = 2

// virtioNICs are the guest's NICs: name in the guest, MAC (virtio.sh names
// them by it), the host bridge that joins it to its peer, and device
// properties of its own. gen0's device implements guest offloads without
// letting the driver turn them off, so virtio_net refuses native XDP on it
// (drivers/net/virtio_net.c virtnet_xdp_set): the ladder's native ->
// generic step on a real driver.
var virtioNICs = []struct{ name, mac, bridge, props string }{
	{"lan0", "52:54:00:61:00:01", "vbr-lan", ""},
	{"lanh", "52:54:00:61:00:02", "vbr-lan", ""},
	{"wan0", "52:54:00:62:00:01", "vbr-wan", ""},
	{"wanh", "52:54:00:62:00:02", "vbr-wan", ""},
	{"gen0", "52:54:00:64:00:01", "vbr-gen", ",ctrl_guest_offloads=off"},
	{"genh", "52:54:00:64:00:02", "vbr-gen", ""},
}

// virtioHost makes the host side of the guest's NICs in a namespace of its
// own: a multi-queue tap per NIC (QEMU's user-space netdevs have a single
// queue, so a virtio NIC on them gets one queue pair) and a bridge per
// pair. The tap spreads the frames it hands QEMU over its queues by flow
// hash (drivers/net/tun.c tun_automq_select_queue), which is the guest
// NIC's RX queue: the RSS the test observes.
func virtioHost(t *testing.T) (ns *netns.NS, netdevs, devices []string) {
	ns = nstest.New(t, "vm612")
	run := func(args ...string) { nstest.Run(t, ns, args...) }
	run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	for _, br := range []string{"vbr-lan", "vbr-wan", "vbr-gen"} {
		run("ip", "link", "add", br, "type", "bridge")
		run("ip", "link", "set", br, "up")
	}
	vectors := 2*virtioQueues + 2 // one per virtqueue, the control queue and config changes
	for i, n := range virtioNICs {
		tap := "vt-" + n.name
		run("ip", "tuntap", "add", "dev", tap, "mode", "tap", "multi_queue")
		run("ip", "link", "set", tap, "master", n.bridge)
		run("ip", "link", "set", tap, "up")
		netdevs = append(netdevs, fmt.Sprintf("tap,id=%s,ifname=%s,script=no,downscript=no,vhost=off,queues=%d", n.name, tap, virtioQueues))
		// iommu_platform: the driver uses the DMA API, which virtio_net's
		// AF_XDP zero-copy needs (virtnet_xsk_pool_enable: no DMA device,
		// no pool); queue_reset (VIRTIO_F_RING_RESET) is 7.2's default.
		devices = append(devices, fmt.Sprintf("virtio-net-pci,netdev=%s,mac=%s,mq=on,vectors=%d,iommu_platform=on,disable-legacy=on,queue_reset=on,addr=%#x%s",
			n.name, n.mac, vectors, 0x10+i, n.props))
	}
	return ns, netdevs, devices
}

// unitArgv is the chain that runs the daemon as packaging/ovfwd.service
// does (appliance/testbed/unit), for the guest's ovfwd user (uid 990,
// made by virtio.sh), one argument a line.
func unitArgv(t *testing.T) string {
	t.Helper()
	u, err := unit.Parse(packaging.Unit)
	if err != nil {
		t.Fatal(err)
	}
	u.UID, u.GID, u.TunNode = 990, 990, 0
	for i := range u.Limits { // root in the guest: the unit's limits as they are
		u.Limits[i].Value = u.Limits[i].Unit
	}
	return strings.Join(u.Argv(), "\n") + "\n"
}

// virtioInitrd is the appliance image (for bash, iproute2, socat and
// openvpn) followed by an archive with this run's binaries, the 6.12
// modules and the script, which is the guest's init.
func virtioInitrd(t *testing.T, img *Image, k *Kernel, files map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "initrd")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base, err := os.Open(img.CPIO)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.Copy(f, base)
	base.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := newCPIO(f)
	// Every directory the files need, parents first (sorted): the package
	// directories the test binaries run in, whether or not they have
	// testdata.
	dirs := map[string]bool{"vmtest/modules": true, "vmtest/pkg/afxdp": true}
	for guest := range files {
		dirs[filepath.Dir(guest)] = true
	}
	for d := range maps.Clone(dirs) {
		for ; d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		c.Dir(d, 0o755)
	}
	for _, m := range VirtioModules {
		c.Copy("vmtest/modules/"+filepath.Base(m), k.Module(m), 0o644)
	}
	for guest, host := range files {
		c.Copy(guest, host, 0o755)
	}
	c.Copy("vmtest/init", "testdata/virtio.sh", 0o755)
	c.File("vmtest/unit.argv", 0o644, []byte(unitArgv(t)))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// virtioReport is what the guest said: steps, facts and status snapshots.
type virtioReport struct {
	facts map[string]string
	snaps map[string]status.Snapshot
}

// parseVirtioReport collects the FACT lines (a key given twice keeps both
// values, a line each) and the STATUS lines; a STATUS whose JSON does not
// decode is returned as an error and left out.
func parseVirtioReport(out string) (virtioReport, []error) {
	var errs []error
	r := virtioReport{facts: map[string]string{}, snaps: map[string]status.Snapshot{}}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		if rest, ok := strings.CutPrefix(l, "FACT "); ok {
			k, v, _ := strings.Cut(rest, " ")
			if _, dup := r.facts[k]; dup {
				r.facts[k] += "\n" + v
			} else {
				r.facts[k] = v
			}
		}
		if rest, ok := strings.CutPrefix(l, "STATUS "); ok {
			tag, js, _ := strings.Cut(rest, " ")
			var s status.Snapshot
			if err := json.Unmarshal([]byte(js), &s); err != nil {
				errs = append(errs, fmt.Errorf("status %s: %v: %.200s", tag, err, js))
				continue
			}
			r.snaps[tag] = s
		}
	}
	return r, errs
}

var virtioStepRE = regexp.MustCompile(`(?m)^step "([^"$]+)"`)

// TestVirtioGuest runs ovfwd on Debian's Linux 6.12 with virtio-net NICs of
// two queue pairs: AF_XDP on a real driver, as the steps of
// testdata/virtio.sh and the assertions below describe.
func TestVirtioGuest(t *testing.T) {
	nstest.RequireRoot(t)
	qv, err := QEMUVersion()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	k, err := GetPinnedKernel(Kernel612)
	if err != nil {
		t.Fatal(err)
	}
	k61, err := GetKernel()
	if err != nil {
		t.Fatal(err)
	}
	var buildLog strings.Builder
	img, err := GetImage(k61, &buildLog)
	if err != nil {
		t.Fatalf("%v\n%s", err, buildLog.String())
	}
	t.Logf("%s; kernel %s %s; image %s (%v)", qv, k.Pkg, k.PkgVersion, img.Key, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	dir := t.TempDir()
	files := map[string]string{}
	for guest, pkg := range map[string]string{
		"vmtest/ovfwd":    "github.com/ovfwd/ovfwd/cmd/ovfwd",
		"vmtest/xskprobe": "github.com/ovfwd/ovfwd/appliance/testbed/vmtest/xskprobe",
	} {
		out := filepath.Join(dir, filepath.Base(guest))
		if err := BuildStatic(pkg, out); err != nil {
			t.Fatal(err)
		}
		files[guest] = out
	}
	// The afxdp package's tests, as the 6.1 fast-path guest runs the fast
	// path's: a static test binary, with the package's testdata.
	bin := filepath.Join(dir, "afxdp.test")
	cmd := exec.Command("go", "test", "-c", "-o", bin, "github.com/ovfwd/ovfwd/appliance/afxdp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -c ./appliance/afxdp: %v\n%s", err, out)
	}
	if err := checkStatic(bin); err != nil {
		t.Fatal(err)
	}
	files["vmtest/afxdp.test"] = bin
	td := "../../afxdp/testdata" // the tree the binary was built from
	err = filepath.WalkDir(td, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(td, p)
			files["vmtest/pkg/afxdp/testdata/"+rel] = p
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ns, netdevs, devices := virtioHost(t)
	initrd := virtioInitrd(t, img, k, files)
	t.Logf("guest binaries and initramfs built in %v", time.Since(start).Round(time.Millisecond))

	r, err := Boot(context.Background(), t.TempDir(), Machine{
		Kernel: k, Initrd: initrd, IntRemap: true, CPUs: 2, MemMB: 2048, NetNS: ns.Name,
		Netdevs: netdevs, Devices: devices, Timeout: 10 * time.Minute,
		Append: "rdinit=/vmtest/init",
	})
	t.Logf("guest ran %v; %s", r.Elapsed.Round(time.Millisecond), uptimes(r.Output))
	if err != nil {
		dumpGuest(t, r)
		t.Fatal(err)
	}
	script, err := os.ReadFile("testdata/virtio.sh")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range virtioStepRE.FindAllStringSubmatch(string(script), -1) {
		want = append(want, m[1])
	}
	checkSteps(t, r, want)
	rep, errs := parseVirtioReport(r.Output)
	for _, err := range errs {
		t.Error(err)
	}
	if !strings.Contains(r.Output, "KERNEL "+k.Release) {
		t.Errorf("the guest did not report running %s", k.Release)
	}
	checkVirtio(t, rep)
	checkGoTests(t, r.Output)
}

// checkGoTests wants the afxdp package's test binary to have passed on the
// guest's kernel, with no test skipped: under OVFWD_REQUIRE_PRIV=1 a test
// that cannot run here must fail, not pass by skipping. (virtio.sh leaves
// out one test by name, with its reason.)
func checkGoTests(t *testing.T, out string) {
	for _, pkg := range []string{"afxdp"} { // the packages virtio.sh runs with gotest
		var pass, skip []string
		exit := ""
		for _, l := range strings.Split(out, "\n") {
			rest, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), "GOTEST "+pkg+" ")
			if !ok {
				continue
			}
			switch {
			case strings.HasPrefix(rest, "--- PASS: "):
				pass = append(pass, rest)
			case strings.HasPrefix(rest, "--- SKIP: "):
				skip = append(skip, rest)
			case strings.HasPrefix(rest, "exit "):
				exit = rest
			}
		}
		t.Logf("%s on 6.12: %d passed, %s", pkg, len(pass), exit)
		if !strings.HasPrefix(exit, "exit 0 ") {
			t.Errorf("the %s package's tests failed on the guest's kernel (%q)", pkg, exit)
		}
		if len(pass) == 0 {
			t.Errorf("no %s test passed on the guest's kernel", pkg)
		}
		if len(skip) > 0 {
			t.Errorf("%s tests skipped on the guest's kernel:\n%s", pkg, strings.Join(skip, "\n"))
		}
	}
}

// port is the named port of s, or a zero Port after failing t.
func (r virtioReport) port(t *testing.T, snap, name string) status.Port {
	t.Helper()
	s, ok := r.snaps[snap]
	if !ok {
		t.Errorf("no status %q from the guest", snap)
		return status.Port{}
	}
	for _, p := range s.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Errorf("status %q has no port %s", snap, name)
	return status.Port{}
}

// checkQueues wants virtioQueues queues on p, each mode containing every
// one of want.
func checkQueues(t *testing.T, snap string, p status.Port, want ...string) {
	t.Helper()
	if len(p.Queues) != virtioQueues {
		t.Errorf("%s: port %s has %d queues, want %d", snap, p.Name, len(p.Queues), virtioQueues)
	}
	for _, q := range p.Queues {
		for _, w := range want {
			if !strings.Contains(q.Mode, w) {
				t.Errorf("%s: port %s queue %d mode %q, want it to say %q", snap, p.Name, q.Queue, q.Mode, w)
			}
		}
	}
}

func checkVirtio(t *testing.T, rep virtioReport) {
	// What the device and driver negotiated, and what refused zero-copy.
	// 6.12's virtio_net has XSK pool code (virtnet_xsk_pool_enable) but
	// never sets NETDEV_XDP_ACT_XSK_ZEROCOPY in xdp_features
	// (virtnet_probe), so the socket layer refuses zero-copy with
	// EOPNOTSUPP before the driver is asked (net/xdp/xsk_buff_pool.c
	// xp_assign_dev) although QEMU gave both features it needs.
	zc := false
	for _, ifn := range []string{"lan0", "wan0"} {
		for _, f := range []string{"virtio.access_platform", "virtio.ring_reset", "virtio.mq", "virtio.ctrl_guest_offloads"} {
			if got := rep.facts[ifn+"."+f]; got != "true" {
				t.Errorf("%s %s = %q: QEMU did not give the feature (iommu_platform, queue_reset, mq)", ifn, f, got)
			}
		}
		if got := rep.facts[ifn+".driver"]; got != "virtio_net" {
			t.Errorf("%s driver %q", ifn, got)
		}
		acts := rep.facts[ifn+".xdp_features"]
		if !strings.Contains(acts, "basic") || !strings.Contains(acts, "redirect") {
			t.Errorf("%s xdp_features %q: no basic/redirect (the netdev genetlink query failed?)", ifn, acts)
		}
		zc = strings.Contains(acts, "xsk_zerocopy")
		for q := 0; q < virtioQueues; q++ {
			got := rep.facts[fmt.Sprintf("%s.q%d.zerocopy_bind", ifn, q)]
			switch {
			case zc && got != "ok":
				t.Errorf("%s queue %d: xdp_features has xsk_zerocopy but an XDP_ZEROCOPY bind failed: %s", ifn, q, got)
			case !zc && got != "ENOTSUP":
				t.Errorf("%s queue %d: XDP_ZEROCOPY bind %q, want ENOTSUP (no xsk_zerocopy in xdp_features)", ifn, q, got)
			}
		}
	}
	t.Logf("zero-copy on virtio_net: %v (xdp_features %q, XDP_ZEROCOPY bind %q)", zc, rep.facts["lan0.xdp_features"], rep.facts["lan0.q0.zerocopy_bind"])

	// Run 1: zero-copy asked for on both ports, the kernel's answer per
	// queue in status and log, two workers, RSS over both queues.
	lanMode := []string{"copy, native XDP", "zero-copy refused by the driver: operation not supported"}
	if zc {
		lanMode = []string{"zero-copy, native XDP"}
	}
	checkQueues(t, "started", rep.port(t, "started", "lan"), lanMode...)
	checkQueues(t, "started", rep.port(t, "started", "wan"), "native XDP")
	if s := rep.snaps["started"]; len(s.Workers) != virtioQueues {
		t.Errorf("%d workers, want one per queue (%d)", len(s.Workers), virtioQueues)
	}
	logs := rep.facts["log.run1"]
	for q := 0; q < virtioQueues; q++ {
		want := fmt.Sprintf(`port=lan ifname=lan0 queue=%d zerocopy=%v xdp=native`, q, zc)
		if !strings.Contains(logs, want) {
			t.Errorf("the log has no %q line:\n%s", want, logs)
		}
	}
	lan := rep.port(t, "flows", "lan")
	for _, q := range lan.Queues {
		if q.RxPackets == 0 {
			t.Errorf("flows: lan queue %d received nothing (rx_packets 0): the flows did not spread over the queues", q.Queue)
		}
	}
	if lan.Rx.Packets < 64 {
		t.Errorf("flows: lan received %d packets, want the 64 flows' at least", lan.Rx.Packets)
	}
	if wan := rep.port(t, "flows", "wan"); wan.Tx.Packets < 58 {
		t.Errorf("flows: wan sent %d packets, want 58 or more", wan.Tx.Packets)
	}
	if v := rep.snaps["vpn"].VPN; v == nil || len(v.Peers) != 1 || v.Peers[0].Name != "alice" || v.Peers[0].Rx.Packets == 0 {
		t.Errorf("vpn: status has no alice with traffic: %+v", v)
	}

	// Run 2: the fast path redirects lan -> wan in the kernel, native XDP.
	fl := rep.port(t, "fast", "lan")
	checkQueues(t, "fast", fl, "native XDP")
	checkQueues(t, "fast", rep.port(t, "fast", "wan"), "native XDP")
	if n := fl.Backend["fast_forwarded"]; n < 14 {
		t.Errorf("fast: lan fast_forwarded %d, want the 16 flows (14 or more)", n)
	}
	if !strings.Contains(rep.facts["lan0.xdp_attached"], "prog/xdp id") {
		t.Errorf("fast: ip link shows %q on lan0, want a native (prog/xdp) program", rep.facts["lan0.xdp_attached"])
	}

	// Run 3: native refused on gen0 -> generic, said per queue; lan stays
	// native.
	checkQueues(t, "generic", rep.port(t, "generic", "gen"), "generic XDP", "native XDP: ", "operation not supported")
	checkQueues(t, "generic", rep.port(t, "generic", "lan"), "native XDP")
	if g := rep.port(t, "generic", "gen"); g.Rx.Packets == 0 || g.Tx.Packets == 0 {
		t.Errorf("generic: gen port rx %d tx %d packets, want traffic both ways", g.Rx.Packets, g.Tx.Packets)
	}
}
