package vpnbench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"time"

	"github.com/ovfwd/ovfwd/appliance/runner"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpne2e"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

// Options configure Run; zero values take the defaults.
type Options struct {
	Binary   string        // ovfwd binary to run as server A; default this executable
	Rounds   int           // A B pairs; default 2 (A B A B)
	Duration time.Duration // iperf3 time per direction; default 10s
	Cipher   string        // data cipher both sides use; default AES-256-GCM
	Tag      string        // namespace tag; default "vpb"
	Dir      string        // work directory kept for inspection (its parents must let ovfwd's unit user through); default a temporary one, removed
	// ServerCPU is the CPU either server runs on (and ovfwd's workers);
	// zero means CPU 1, -1 leaves them where the daemon and the scheduler
	// put them. ClientCPU is where this process, and so the client and
	// iperf3 it starts, runs: CPU 0 by default, -1 unpinned.
	ServerCPU int
	ClientCPU int
}

func (o *Options) defaults() error {
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.Binary = exe
	}
	if o.Rounds <= 0 {
		o.Rounds = 2
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Cipher == "" {
		o.Cipher = "AES-256-GCM"
	}
	if o.Tag == "" {
		o.Tag = "vpb"
	}
	if o.ServerCPU == 0 {
		o.ServerCPU = 1
	}
	if runtime.NumCPU() < 2 {
		o.ServerCPU, o.ClientCPU = -1, -1
	}
	if o.ServerCPU >= 0 && o.ServerCPU == o.ClientCPU {
		return fmt.Errorf("vpnbench: server and client both on CPU %d", o.ServerCPU)
	}
	return nil
}

// Server names in results.
const (
	Ovfwd   = "ovfwd"
	OpenVPN = "openvpn"
)

// Sample is one measured run of one server.
type Sample struct {
	Server     string
	Round      int
	UpMbps     float64 // client → LAN host, receiver's rate
	DownMbps   float64 // LAN host → client
	Bytes      int64   // received in both tests together
	UpMSS      int     // the client socket's TCP MSS, up and down
	DownMSS    int
	CPUSeconds float64 // server's utime+stime over both tests
	// IdleCPU is the server's CPU use (cores) with the client connected
	// and no traffic, measured over idleWindow before the tests: a
	// polling data plane pays it whether or not bytes move.
	IdleCPU float64
}

// idleWindow is how long the idle CPU use is measured.
const idleWindow = 2 * time.Second

// CPUPerGB is the server's CPU seconds per 10^9 bytes moved.
func (s Sample) CPUPerGB() float64 {
	if s.Bytes == 0 {
		return 0
	}
	return s.CPUSeconds / (float64(s.Bytes) / 1e9)
}

// Summary is the medians of one server's samples.
type Summary struct {
	UpMbps, DownMbps, CPUPerGB float64
}

// Result is one benchmark run.
type Result struct {
	Options Options
	Samples []Sample
	Ovfwd   Summary
	OpenVPN Summary
}

// Run measures ovfwd and openvpn alternately and writes a table to w.
func Run(ctx context.Context, w io.Writer, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.ClientCPU >= 0 {
		// Before anything starts: what this process starts inherits it.
		restore, err := netns.PinProcess(o.ClientCPU)
		if err != nil {
			return nil, fmt.Errorf("vpnbench: client on CPU %d: %w", o.ClientCPU, err)
		}
		defer restore()
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "ovfwd-vpnbench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	l, err := vpne2e.NewLab(o.Tag, dir, 1)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	l.Logf = func(f string, a ...any) { fmt.Fprintf(w, f+"\n", a...) } // once: what ovfwd runs as
	if err := l.StartIperfServers(2); err != nil {
		return nil, err
	}
	profile, err := l.NewProfile(0, pki.Profile{Name: "bench", Ciphers: o.Cipher})
	if err != nil {
		return nil, err
	}
	srvOpts := vpne2e.ServerOptions{Ciphers: []string{o.Cipher}, Pin: o.ServerCPU >= 0, CPU: o.ServerCPU}
	fmt.Fprintf(w, "VPN benchmark: 1 stock openvpn client, %s, tls-crypt, TCP iperf3 %v each way to a host behind the server, %d round(s) of ovfwd (AF_XDP copy) then openvpn (--server, userspace, kernel forwarding)\n",
		o.Cipher, o.Duration, o.Rounds)
	fmt.Fprintf(w, "servers on %s, client and iperf3 on %s\n", cpuName(o.ServerCPU), cpuName(o.ClientCPU))
	fmt.Fprintf(w, "both servers: a session (scheduler autogroup) of their own, data path at nice %d (ovfwd's workers; openvpn's nice option), no server-side MSS clamp (the client's mssfix sizes segments; MSS column)\n", runner.WorkerNice)
	fmt.Fprintf(w, "CPU s: the server process's utime+stime (all threads, /proc/PID/stat) over the two transfers; idle: the same with the client connected and no traffic\n")
	const row = "%-6s %-8s %8s %10s %6s %7s %9s %7s %9s\n"
	fmt.Fprintf(w, row, "round", "server", "up Mb/s", "down Mb/s", "GB", "CPU s", "CPU s/GB", "idle %", "MSS up/dn")
	res := &Result{Options: o}
	for round := 1; round <= o.Rounds; round++ {
		for _, name := range []string{Ovfwd, OpenVPN} {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			s, err := measure(l, name, o, srvOpts, profile)
			if err != nil {
				return res, fmt.Errorf("vpnbench: round %d %s: %w", round, name, err)
			}
			s.Round = round
			res.Samples = append(res.Samples, s)
			fmt.Fprintf(w, row, strconv.Itoa(round), name, f0(s.UpMbps), f0(s.DownMbps), f2(float64(s.Bytes)/1e9), f2(s.CPUSeconds), f2(s.CPUPerGB()), f0(100*s.IdleCPU),
				fmt.Sprintf("%d/%d", s.UpMSS, s.DownMSS))
		}
	}
	res.Ovfwd, res.OpenVPN = summarize(res.Samples, Ovfwd), summarize(res.Samples, OpenVPN)
	for _, s := range []struct {
		name string
		m    Summary
	}{{Ovfwd, res.Ovfwd}, {OpenVPN, res.OpenVPN}} {
		fmt.Fprintf(w, row, "median", s.name, f0(s.m.UpMbps), f0(s.m.DownMbps), "", "", f2(s.m.CPUPerGB), "", "")
	}
	fmt.Fprintf(w, "ratio ovfwd/openvpn: up %s, down %s, CPU s/GB %s\n",
		ratio(res.Ovfwd.UpMbps, res.OpenVPN.UpMbps), ratio(res.Ovfwd.DownMbps, res.OpenVPN.DownMbps), ratio(res.Ovfwd.CPUPerGB, res.OpenVPN.CPUPerGB))
	return res, nil
}

// measure starts one server and a fresh client, runs both iperf3
// directions over IPv4 inside the tunnel, and stops both.
func measure(l *vpne2e.Lab, name string, o Options, so vpne2e.ServerOptions, profile string) (Sample, error) {
	s := Sample{Server: name}
	var srv *vpne2e.Server
	var err error
	if name == Ovfwd {
		srv, err = l.StartOvfwd(o.Binary, so)
	} else {
		srv, err = l.StartOpenVPN(so)
	}
	if err != nil {
		return s, err
	}
	defer srv.Stop()
	c, err := l.StartClient(0, profile)
	if err != nil {
		return s, err
	}
	defer c.Stop()
	if err := c.WaitUp(45 * time.Second); err != nil {
		return s, err
	}
	if got := c.Cipher(); got != o.Cipher {
		return s, fmt.Errorf("client negotiated %q, want %q", got, o.Cipher)
	}
	idle0, err := srv.CPUSeconds()
	if err != nil {
		return s, err
	}
	time.Sleep(idleWindow)
	idle1, err := srv.CPUSeconds()
	if err != nil {
		return s, err
	}
	s.IdleCPU = (idle1 - idle0) / idleWindow.Seconds()
	secs := strconv.Itoa(int(o.Duration.Round(time.Second) / time.Second))
	if secs == "0" {
		secs = "1"
	}
	cpu0, err := srv.CPUSeconds()
	if err != nil {
		return s, err
	}
	up, err := vpne2e.Iperf(c.NS, vpne2e.LANHost4, 0, "-t", secs)
	if err != nil {
		return s, err
	}
	down, err := vpne2e.Iperf(c.NS, vpne2e.LANHost4, 1, "-t", secs, "-R")
	if err != nil {
		return s, err
	}
	cpu1, err := srv.CPUSeconds()
	if err != nil {
		return s, err
	}
	s.UpMbps, s.DownMbps = up.Mbps, down.Mbps
	s.UpMSS, s.DownMSS = up.MSS, down.MSS
	s.Bytes = up.Bytes + down.Bytes
	s.CPUSeconds = cpu1 - cpu0
	return s, nil
}

func summarize(samples []Sample, server string) Summary {
	var up, down, cpu []float64
	for _, s := range samples {
		if s.Server == server {
			up, down, cpu = append(up, s.UpMbps), append(down, s.DownMbps), append(cpu, s.CPUPerGB())
		}
	}
	return Summary{UpMbps: median(up), DownMbps: median(down), CPUPerGB: median(cpu)}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func cpuName(cpu int) string {
	if cpu < 0 {
		return "any CPU"
	}
	return "CPU " + strconv.Itoa(cpu)
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
