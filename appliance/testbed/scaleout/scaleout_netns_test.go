package scaleout

import (
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
)

func needTools(t *testing.T) {
	t.Helper()
	nstest.RequireRoot(t)
	for _, tool := range []string{"bird", "birdc", "openvpn", "ethtool", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
				t.Fatalf("%s not installed (.ci/install-deps installs it)", tool)
			}
			t.Skipf("%s not installed (.ci/install-deps installs it)", tool)
		}
	}
}

// newLab builds the lab with n clients, BIRD everywhere and ovfwd on both
// appliances, and waits until the upstream router has both pools.
func newLab(t *testing.T, n int, bulk int, opts ...func(*Lab)) (*Lab, string) {
	t.Helper()
	needTools(t)
	bin := nstest.BuildOvfwd(t)
	l, err := NewLab(unittest.TempDir(t, unittest.Load(t)), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	l.Logf = t.Logf
	l.BulkRoutes = bulk
	for _, o := range opts {
		o(l)
	}
	if err := l.StartBirds(); err != nil {
		t.Fatal(err)
	}
	for _, a := range l.Apps {
		if err := l.StartOvfwd(bin, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.BGPUp(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, a := range l.Apps {
		if !waitFor(10*time.Second, 50*time.Millisecond, func() bool { return len(l.RouteVia(a.Pool)) == 1 }) {
			out, _ := l.Up.Run("ip", "route")
			t.Fatalf("upstream has no route to %s's pool %v:\n%s", a.Name, a.Pool, out)
		}
	}
	return l, bin
}

// waitClients waits until every client has a tunnel address the LAN host
// reaches, and returns how long that took.
func waitClients(t *testing.T, l *Lab, cs []*Client, d time.Duration, in func(*Client) *Appliance) time.Duration {
	t.Helper()
	start := time.Now()
	for _, c := range cs {
		var addr netip.Addr
		ok := waitFor(d-time.Since(start), 100*time.Millisecond, func() bool {
			var up bool
			addr, up = l.Reachable(c)
			return up && (in == nil || in(c).Owns(addr))
		})
		if !ok {
			t.Fatalf("client %d not reachable from the LAN (address %v) in %v:\n%s", c.Index, addr, d, c.Tail())
		}
	}
	return time.Since(start)
}

// TestScaleOutFailover: two appliances behind an upstream BIRD with ECMP.
// SIGKILL of one ovfwd withdraws its pool at the upstream and moves its
// clients to the other appliance, while the other's clients keep their
// traffic; the killed one comes back and is announced again.
func TestScaleOutFailover(t *testing.T) {
	l, bin := newLab(t, 4, 0)
	a, b := l.Apps[0], l.Apps[1]
	if via := l.RouteVia(Anycast); len(via) != 2 {
		out, _ := l.Up.Run("ip", "route")
		t.Errorf("anycast %v via %v, want an ECMP route over both appliances:\n%s", Anycast, via, out)
	}
	var cs []*Client
	began := time.Now()
	for i := 0; i < 4; i++ {
		order := []*Appliance{a, b}
		if i >= 2 {
			order = []*Appliance{b, a}
		}
		c, err := l.StartClient(i, order...)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	home := func(c *Client) *Appliance {
		if c.Index < 2 {
			return a
		}
		return b
	}
	waitClients(t, l, cs, 40*time.Second, home)
	t.Logf("4 stock clients up, 2 on each appliance, the LAN host reaches all %v after they started", time.Since(began).Round(time.Millisecond))

	// b's clients are pinged throughout the failover: nothing of theirs
	// may be lost.
	bAddr := cs[2].Addr()
	pinged := make(chan int, 1)
	const watch = 60 // 12 s at 0.2 s
	go func() { pinged <- Ping(l.LAN, bAddr, watch) }()
	time.Sleep(time.Second)

	killed := time.Now()
	a.KillOvfwd()
	if !waitFor(15*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(a.Pool)) == 0 }) {
		t.Fatalf("a's pool still routed at the upstream 15 s after SIGKILL: %v", l.RouteVia(a.Pool))
	}
	withdrawn := time.Since(killed)
	if via := l.RouteVia(Anycast); len(via) != 1 || via[0] != b.Link.Addr().String() {
		t.Errorf("anycast after a's death via %v, want b only", via)
	}
	moved := waitClients(t, l, cs[:2], 30*time.Second, func(*Client) *Appliance { return b })
	back := time.Since(killed)
	if n := <-pinged; n != watch {
		t.Errorf("b's client lost %d of %d pings while a failed", watch-n, watch)
	}
	if via := l.RouteVia(b.Pool); len(via) != 1 {
		t.Errorf("b's pool route disturbed: %v", via)
	}
	t.Logf("SIGKILL of ovfwd a: pool withdrawn at the upstream after %v; its 2 clients pass traffic through b after %v (last one %v after the withdrawal); b's client lost 0 of %d pings",
		withdrawn.Round(time.Millisecond), back.Round(time.Millisecond), moved.Round(time.Millisecond), watch)

	restarted := time.Now()
	if err := l.StartOvfwd(bin, a); err != nil {
		t.Fatal(err)
	}
	if !waitFor(15*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(a.Pool)) == 1 }) {
		t.Fatalf("a's pool not announced again after restart")
	}
	t.Logf("ovfwd a restarted: pool announced again %v after the start", time.Since(restarted).Round(time.Millisecond))
	// The anycast prefix is a separate BGP route: it may reach the upstream
	// a scan after the pool does.
	if !waitFor(5*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(Anycast)) == 2 }) {
		t.Errorf("anycast 5 s after a's return via %v, want both", l.RouteVia(Anycast))
	}
	if log := a.OvfwdLog(); !strings.Contains(log, "route export") {
		t.Errorf("no export in a's log:\n%s", log)
	}

	// A port going down is a data-plane failure: a withdraws until it is
	// back.
	nstest.Run(t, a.NS, "ip", "link", "set", "p0", "down")
	if !waitFor(5*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(a.Pool)) == 0 }) {
		t.Errorf("a's pool still announced with its port p0 down")
	}
	if st, err := a.Status(); err != nil || st.Ready || st.NotReady != "port p0 link down" {
		t.Errorf("a's status with p0 down: ready %v %q %v", st != nil && st.Ready, st.NotReady, err)
	}
	upAgain := time.Now()
	nstest.Run(t, a.NS, "ip", "link", "set", "p0", "up")
	if !waitFor(10*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(a.Pool)) == 1 }) {
		t.Errorf("a's pool not announced again with p0 back up")
	}
	t.Logf("port p0 down: pool withdrawn; back up: announced again after %v (hold-down 3 s)", time.Since(upAgain).Round(time.Millisecond))

	// SIGTERM: the routes go first, before the tunnels.
	stopped := time.Now()
	a.StopOvfwd()
	if !waitFor(5*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(a.Pool)) == 0 }) {
		t.Errorf("a's pool still announced after SIGTERM")
	}
	if log := a.OvfwdLog(); !strings.Contains(log, "exported routes withdrawn") {
		t.Errorf("no withdrawal in a's log at SIGTERM:\n%s", log)
	}
	t.Logf("SIGTERM: pool withdrawn at the upstream %v after the signal", time.Since(stopped).Round(time.Millisecond))
}

// TestScaleOutDrain: `ovfwd drain -deadline` on one appliance withdraws
// its pool (its connected clients stay reachable by their host routes),
// sends a new client to the other appliance, keeps the connected clients'
// traffic until the deadline, then moves them; -cancel announces the
// pool again. Then the other appliance dies as a whole box (ovfwd and
// BIRD killed): the upstream's BGP hold timer withdraws it and every
// client moves.
func TestScaleOutDrain(t *testing.T) {
	l, bin := newLab(t, 4, 0)
	a, b := l.Apps[0], l.Apps[1]
	var cs []*Client
	for i := 0; i < 3; i++ {
		order := []*Appliance{b, a}
		if i == 2 {
			order = []*Appliance{a, b}
		}
		c, err := l.StartClient(i, order...)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	waitClients(t, l, cs, 40*time.Second, func(c *Client) *Appliance {
		if c.Index == 2 {
			return a
		}
		return b
	})
	c0 := cs[0].Addr()

	const deadline = 8 * time.Second
	pinged := make(chan int, 1)
	const watch = 30 // the 6 s after the drain starts, before its deadline
	drained := time.Now()
	out, err := exec.Command(bin, "drain", "-s", b.Sock, "-deadline", deadline.String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ovfwd drain: %v\n%s", err, out)
	}
	go func() { pinged <- Ping(l.LAN, c0, watch) }()
	if !waitFor(5*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(b.Pool)) == 0 }) {
		t.Fatalf("b's pool still announced 5 s into the drain")
	}
	withdrawn := time.Since(drained)
	// b installs its clients' host routes before it withdraws the pool
	// (make before break); the anycast prefix may follow in a later
	// BGP update.
	if via := l.RouteVia(netip.PrefixFrom(c0, 32)); len(via) != 1 || via[0] != b.Link.Addr().String() {
		t.Errorf("draining b's client %v routed via %v at the upstream when the pool went, want b", c0, via)
	}
	if !waitFor(3*time.Second, 20*time.Millisecond, func() bool {
		via := l.RouteVia(Anycast)
		return len(via) == 1 && via[0] == a.Link.Addr().String()
	}) {
		t.Errorf("anycast while b drains via %v, want a only", l.RouteVia(Anycast))
	}
	st, err := b.Status()
	if err != nil || st.Ready || st.NotReady != "draining" || st.Drain == nil || st.Drain.Peers != 2 {
		t.Errorf("b's status while draining: %+v %v", st, err)
	}
	// A new client that lists b first ends up on a.
	c3, err := l.StartClient(3, b, a)
	if err != nil {
		t.Fatal(err)
	}
	newOn := waitClients(t, l, []*Client{c3}, 20*time.Second, func(*Client) *Appliance { return a })
	if st, _ := b.Status(); st == nil || st.VPN == nil || st.VPN.Drops["control_draining"] == 0 {
		t.Errorf("b did not count a refused client: %+v", st)
	}
	if n := <-pinged; n != watch {
		t.Errorf("b's connected client lost %d of %d pings before the drain deadline", watch-n, watch)
	}
	t.Logf("drain of b: pool withdrawn after %v, connected clients kept by host routes; a new client listing b first passed traffic through a after %v; b's client lost 0 of %d pings before the deadline",
		withdrawn.Round(time.Millisecond), newOn.Round(time.Millisecond), watch)

	// At the deadline b tells its clients RESTART,[N]: they move to a.
	if wait := time.Until(drained.Add(deadline)); wait > 0 {
		time.Sleep(wait)
	}
	at := time.Now()
	moved := waitClients(t, l, cs[:2], 30*time.Second, func(*Client) *Appliance { return a })
	t.Logf("drain deadline: b's 2 clients pass traffic through a %v after it (%v after the drain began)",
		moved.Round(time.Millisecond), time.Since(drained).Round(time.Millisecond))
	// b removes the sessions once the RESTARTs are acknowledged or 2 s
	// passed; then nothing of b's is announced.
	if !waitFor(5*time.Second, 50*time.Millisecond, func() bool { return len(l.RouteVia(netip.PrefixFrom(c0, 32))) == 0 }) {
		t.Errorf("b still announces its former client %v 5 s after the deadline", c0)
	}
	if st, err := b.Status(); err != nil || st.Export == nil || len(st.Export.Routes) != 0 || len(st.VPN.Peers) != 0 {
		t.Errorf("b after the deadline: %+v %v", st, err)
	}
	_ = at

	if out, err := exec.Command(bin, "drain", "-s", b.Sock, "-cancel").CombinedOutput(); err != nil {
		t.Fatalf("ovfwd drain -cancel: %v\n%s", err, out)
	}
	if !waitFor(5*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(b.Pool)) == 1 }) {
		t.Fatalf("b's pool not announced after drain -cancel")
	}

	// a hangs as a whole box (ovfwd and BIRD stopped, no FIN or RST
	// leaves it): only the upstream's BGP hold timer (3 s) notices.
	all := append(cs, c3)
	hung := time.Now()
	a.Freeze()
	if !waitFor(15*time.Second, 20*time.Millisecond, func() bool { return len(l.RouteVia(a.Pool)) == 0 }) {
		t.Fatalf("a's pool still routed 15 s after the box hung")
	}
	withdrawn = time.Since(hung)
	waitClients(t, l, all, 40*time.Second, func(*Client) *Appliance { return b })
	t.Logf("box a hung (ovfwd and BIRD stopped): pool withdrawn by the upstream's hold timer after %v; all %d clients pass traffic through b after %v",
		withdrawn.Round(time.Millisecond), len(all), time.Since(hung).Round(time.Millisecond))
}

// TestPackagedBirdFragment: the lab runs the BIRD fragment the package
// ships, and BIRD parses the packaged file.
func TestPackagedBirdFragment(t *testing.T) {
	b, err := os.ReadFile("../../../packaging/bird-ovfwd.conf")
	if err != nil {
		t.Fatal(err)
	}
	var body []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			body = append(body, line)
		}
	}
	if got := strings.TrimSpace(strings.Join(body, "\n")); got != strings.TrimSpace(birdFragment) {
		t.Errorf("packaging/bird-ovfwd.conf differs from the lab's fragment:\n%s\n---\n%s", got, birdFragment)
	}
	if _, err := exec.LookPath("bird"); err != nil {
		if os.Getenv("OVFWD_REQUIRE_PRIV") == "1" {
			t.Fatal("bird not installed (.ci/install-deps installs it)")
		}
		t.Skip("bird not installed")
	}
	conf := t.TempDir() + "/bird.conf"
	if err := os.WriteFile(conf, []byte("router id 198.18.181.2;\n"+string(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bird", "-p", "-c", conf).CombinedOutput(); err != nil {
		t.Errorf("bird -p: %v\n%s", err, out)
	}
}
