package scaleout

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// BGP timers: short, so a test sees a dead session within seconds.
const bgpTimers = `hold time 3; keepalive time 1; connect retry time 1; error wait time 1, 4;`

// upstreamBird is the upstream router: eBGP to both appliances, the LAN
// announced to them, and what they announce installed with ECMP (merge
// paths: equal routes from both become one multipath route).
func (l *Lab) upstreamBird() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log %q all;\nrouter id %s;\n", filepath.Join(l.Dir, "bird-up.log"), LANGW)
	b.WriteString(`protocol device { scan time 1; }
protocol direct { ipv4; interface "ul"; }
protocol kernel {
	merge paths on;
	ipv4 { import none; export where source = RTS_BGP; };
}
`)
	if l.BulkRoutes > 0 {
		// A full-table-sized feed for appliance a, off until EnableBulk.
		b.WriteString("protocol static bulk {\n\tdisabled;\n\tipv4;\n")
		for _, p := range BulkPrefixes(l.BulkRoutes) {
			fmt.Fprintf(&b, "\troute %s via %s;\n", p, LANHost)
		}
		b.WriteString("}\n")
	}
	for i, a := range l.Apps {
		export := "source = RTS_DEVICE"
		if i == 0 && l.BulkRoutes > 0 {
			export += ` || proto = "bulk"`
		}
		fmt.Fprintf(&b, "protocol bgp %s {\n\tlocal %s as %d; neighbor %s as %d;\n\t%s\n\tipv4 { import all; export where %s; };\n}\n",
			a.Name, a.Peer, UpstreamAS, a.Link.Addr(), a.AS, bgpTimers, export)
	}
	return b.String()
}

// BulkPrefixes are n host routes (at most 106,496) in 198.19.0.0/16,
// 198.18.0.0/17 and 198.18.192.0/19, clear of the lab's own subnets.
func BulkPrefixes(n int) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range []netip.Prefix{netip.MustParsePrefix("198.19.0.0/16"), netip.MustParsePrefix("198.18.0.0/17"), netip.MustParsePrefix("198.18.192.0/19")} {
		for a := r.Addr(); r.Contains(a) && len(out) < n; a = a.Next() {
			out = append(out, netip.PrefixFrom(a, 32))
		}
	}
	return out
}

// Birdc runs a birdc command on the upstream router.
func (l *Lab) Birdc(args ...string) (string, error) {
	return l.Up.Run(append([]string{"birdc", "-s", filepath.Join(l.Dir, "up", "bird.ctl")}, args...)...)
}

// applianceBird is packaging/bird-ovfwd.conf with the lab's addresses:
// learn what ovfwd exports (table 200, protocol 201) into a table of its
// own, announce it to the upstream, and install what the upstream
// announces in the main table, which ovfwd mirrors into its FIB.
func (a *Appliance) applianceBird() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log %q all;\nrouter id %s;\n", filepath.Join(a.Dir, "bird.log"), a.Link.Addr())
	b.WriteString(birdFragment)
	fmt.Fprintf(&b, "protocol bgp upstream {\n\tlocal %s as %d; neighbor %s as %d;\n\t%s\n\tipv4 { import all; export where proto = \"ovfwd_export\"; };\n}\n",
		a.Link.Addr(), a.AS, a.Peer, UpstreamAS, bgpTimers)
	return b.String()
}

// birdFragment is the appliance side, as packaging/bird-ovfwd.conf has it
// (TestPackagedBirdFragment keeps the two equal).
const birdFragment = `ipv4 table ovfwd4;
protocol device { scan time 1; }
protocol kernel ovfwd_export {
	kernel table 200;
	learn;
	scan time 10;
	ipv4 { table ovfwd4; import where krt_source = 201; export none; };
}
protocol pipe { table master4; peer table ovfwd4; import all; export none; }
protocol kernel {
	ipv4 { import none; export where source = RTS_BGP; };
}
`

func (l *Lab) startBird(nsName string, a *Appliance, conf, dir string) (*Proc, error) {
	path := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	ns := l.Up
	if a != nil {
		ns = a.NS
	}
	_ = nsName
	return l.start(ns, filepath.Join(dir, "bird.out"), "bird", "-f", "-c", path, "-s", filepath.Join(dir, "bird.ctl"), "-P", filepath.Join(dir, "bird.pid"))
}

// StartBirds starts BIRD on the upstream router and both appliances.
func (l *Lab) StartBirds() error {
	upDir := filepath.Join(l.Dir, "up")
	if err := os.MkdirAll(upDir, 0o755); err != nil {
		return err
	}
	var err error
	if l.upBird, err = l.startBird("up", nil, l.upstreamBird(), upDir); err != nil {
		return err
	}
	for _, a := range l.Apps {
		if a.bird, err = l.startBird(a.Name, a, a.applianceBird(), a.Dir); err != nil {
			return err
		}
	}
	return nil
}

// BGPUp waits until the upstream router's sessions to both appliances
// are established.
func (l *Lab) BGPUp(d time.Duration) error {
	ctl := filepath.Join(l.Dir, "up", "bird.ctl")
	var out string
	ok := waitFor(d, 100*time.Millisecond, func() bool {
		out, _ = l.Up.Run("birdc", "-s", ctl, "show", "protocols")
		return strings.Count(out, "Established") == 2
	})
	if !ok {
		return fmt.Errorf("scaleout: BGP not established in %v:\n%s\n%s", d, out, tail(filepath.Join(l.Dir, "bird-up.log"), 2000))
	}
	return nil
}

// BirdRoutes is how many routes the appliance's BIRD has in its main
// table (birdc show route count), 0 when it cannot tell.
func (a *Appliance) BirdRoutes() int {
	out, err := a.NS.Run("birdc", "-s", filepath.Join(a.Dir, "bird.ctl"), "show", "route", "count")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(out, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "%d of", &n); err == nil {
			return n
		}
	}
	return 0
}

// Freeze stops the appliance's ovfwd and BIRD (SIGSTOP): a hung box,
// whose sockets stay open, so its BGP peer learns of it only by the hold
// timer. Close still ends both (SIGKILL after the grace).
func (a *Appliance) Freeze() {
	for _, p := range []*Proc{a.ovfwd, a.bird} {
		_ = syscall.Kill(p.PID(), syscall.SIGSTOP)
	}
}
