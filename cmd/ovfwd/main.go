// Command ovfwd is the appliance's one binary. It parses flags and hands off
// to the packages that hold the logic.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ovfwd/ovfwd/appliance/daemon"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/bench"
	"github.com/ovfwd/ovfwd/appliance/testbed/lab"
	"github.com/ovfwd/ovfwd/appliance/testbed/simlab"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpnbench"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpnload"
	"github.com/ovfwd/ovfwd/cmd/ovfwd/version"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/mlx5"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/pki"
)

const usage = `usage: ovfwd <command> [flags]

commands:
  run      run the appliance from a config file      ovfwd run -c /etc/ovfwd/ovfwd.toml
  check    validate a config file                     ovfwd check [-c] FILE
  status   show a running appliance's state          ovfwd status [-s SOCKET | -c FILE] [-json]
  reload   reload the running daemon's config, fail if it rejects it  ovfwd reload [-s SOCKET | -c FILE] [-pid PID]
  kill     disconnect a VPN client                   ovfwd kill [-s SOCKET | -c FILE] [-halt] NAME|ADDR
  lab      run the namespace lab                      ovfwd lab [-duration D] [-keep] [-clean] [-no-vpn] [-driver afxdp|mlx5-sim]
  pki      make a CA, server and client profiles      ovfwd pki init DIR | pki client DIR NAME -remote HOST:PORT | pki site DIR NAME | pki revoke DIR NAME
  bench    measure                                    ovfwd bench fwd|vpn|mlx5
  probe    list ConnectX functions and their VFIO state  ovfwd probe [-pci ADDR]
  drain    move clients to other appliances          ovfwd drain [-s SOCKET | -c FILE] [-deadline D] [-cancel]
  version  print the version

Run "ovfwd <command> -h" for a command's flags.
`

// defaultConfig and defaultSocket are where the package installs them.
const (
	defaultConfig = "/etc/ovfwd/ovfwd.toml"
	defaultSocket = "/run/ovfwd/ovfwd.sock"
)

// errUsage marks a command-line mistake (exit status 2).
var errUsage = errors.New("usage")

var commands = map[string]func(args []string) error{
	"run":     runCmd,
	"check":   checkCmd,
	"status":  statusCmd,
	"reload":  reloadCmd,
	"kill":    killCmd,
	"lab":     labCmd,
	"pki":     pkiCmd,
	"bench":   benchCmd,
	"probe":   probeCmd,
	"drain":   drainCmd,
	"version": versionCmd,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	name := os.Args[1]
	switch name {
	case "help", "-h", "-help", "--help":
		fmt.Print(usage)
		return
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "ovfwd: unknown command %q\n\n%s", name, usage)
		os.Exit(2)
	}
	err := cmd(os.Args[2:])
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		var list config.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(os.Stderr, e)
			}
		} else {
			fmt.Fprintf(os.Stderr, "ovfwd %s: %v\n", name, err)
		}
		os.Exit(1)
	}
}

// newFlags makes a command's flag set; -h prints synopsis and flags.
// socketFlags adds -s and -c to a command that talks to the status socket;
// the function it returns gives the socket's path once fs is parsed.
func socketFlags(fs *flag.FlagSet) func() (string, error) {
	sock := fs.String("s", defaultSocket, "status socket of the running ovfwd")
	cfgFile := fs.String("c", "", "take the socket path from this config file's [status] socket")
	return func() (string, error) {
		if *cfgFile == "" {
			return *sock, nil
		}
		c, err := config.Load(*cfgFile)
		if err != nil {
			return "", err
		}
		if c.Status.Socket == "" {
			return "", fmt.Errorf("%s turns the status socket off ([status] socket = \"\")", *cfgFile)
		}
		return c.Status.Socket, nil
	}
}

func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("ovfwd "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ovfwd %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags placed anywhere among the positional arguments (Go's
// flag package stops at the first positional) and returns the positionals.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFlags parses a command that takes flags only.
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	return wantArgs(fs, pos, 0, 0)
}

// wantArgs checks the positional count.
func wantArgs(fs *flag.FlagSet, pos []string, min, max int) error {
	if len(pos) < min || len(pos) > max {
		fs.Usage()
		return errUsage
	}
	return nil
}

func runCmd(args []string) error {
	fs := newFlags("run", "-c FILE")
	path := fs.String("c", defaultConfig, "config file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	daemon.Version = version.Version
	return daemon.Run(ctx, *path, nil)
}

func checkCmd(args []string) error {
	fs := newFlags("check", "[-c] FILE")
	path := fs.String("c", "", "config file (or give it as the argument)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0, 1); err != nil {
		return err
	}
	file := *path
	if len(pos) == 1 {
		file = pos[0]
	}
	if file == "" {
		file = defaultConfig
	}
	c, err := config.Load(file)
	if err != nil {
		return err
	}
	var ports []string
	for _, p := range c.Ports {
		where := p.IfName
		if where == "" {
			where = p.PCI
		}
		ports = append(ports, fmt.Sprintf("%s (%s %s)", p.Name, p.Driver, where))
	}
	vpn := "off"
	if c.VPN.Enabled {
		vpn = fmt.Sprintf("on, udp port %d", c.VPN.Port)
	}
	fmt.Printf("ok: %s: %s mode, %d ports [%s], %d static routes, vpn %s\n",
		file, c.Appliance.Mode, len(c.Ports), strings.Join(ports, ", "), len(c.Routes), vpn)
	return nil
}

func statusCmd(args []string) error {
	fs := newFlags("status", "[-s SOCKET | -c FILE] [-json]")
	socketPath := socketFlags(fs)
	asJSON := fs.Bool("json", false, "print the raw JSON snapshot")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sock, err := socketPath()
	if err != nil {
		return err
	}
	s, err := status.Fetch(sock, 5*time.Second)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(os.Stdout, s)
	}
	return status.WriteText(os.Stdout, s)
}

// killCmd disconnects VPN clients through the status socket (root and the
// daemon's group only; see status.Authorized).
func killCmd(args []string) error {
	fs := newFlags("kill", "[-s SOCKET | -c FILE] [-halt] NAME|ADDR")
	socketPath := socketFlags(fs)
	halt := fs.Bool("halt", false, "tell the client to exit (HALT) instead of reconnecting (RESTART)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1, 1); err != nil {
		return err
	}
	sock, err := socketPath()
	if err != nil {
		return err
	}
	n, err := status.Kill(sock, pos[0], *halt, 5*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("disconnected %d session(s) of %s\n", n, pos[0])
	return nil
}

func labCmd(args []string) error {
	fs := newFlags("lab", "[-duration D] [-keep] [-clean] [-no-vpn] [-driver afxdp|mlx5-sim]")
	d := fs.Duration("duration", 0, "stop after this long (0: until Ctrl-C)")
	keep := fs.Bool("keep", false, "leave the lab up at exit (remove it later with -clean)")
	clean := fs.Bool("clean", false, "remove a kept or crashed lab and exit")
	noVPN := fs.Bool("no-vpn", false, "leave out the openvpn client")
	driver := fs.String("driver", "afxdp", "appliance ports: afxdp (the daemon on AF_XDP) or mlx5-sim (the engine on the mlx5 device model)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *clean:
		return lab.Clean(os.Stdout)
	case *driver == "mlx5-sim":
		return simlab.Run(context.Background(), simlab.Options{Duration: *d})
	case *driver != "afxdp":
		fmt.Fprintf(os.Stderr, "ovfwd lab: unknown driver %q (afxdp or mlx5-sim)\n", *driver)
		return errUsage
	}
	return lab.Run(context.Background(), lab.Options{Duration: *d, Keep: *keep, NoVPN: *noVPN})
}

const pkiUsage = `usage: ovfwd pki init DIR
       ovfwd pki client DIR NAME -remote HOST:PORT [-remote …]   (an .ovpn profile)
       ovfwd pki site DIR NAME      (certificate and key files for another ovfwd's [[vpn.client]])
       ovfwd pki revoke DIR NAME [-cert FILE]   (add NAME's certificate to DIR/crl.pem; ovfwd or easy-rsa PKI)
       ovfwd pki tls-crypt-v2 DIR   (a tls-crypt-v2 server key; pki client then gives each profile its own key)
`

func pkiCmd(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, pkiUsage)
		return errUsage
	}
	switch args[0] {
	case "init":
		fs := newFlags("pki init", "DIR")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 1, 1); err != nil {
			return err
		}
		if old, now, err := pki.PrepareDir(pos[0]); err != nil {
			return err
		} else if old != now {
			fmt.Fprintf(os.Stderr, "%s was mode %#o, writable by others; changed it to %#o\n", pos[0], old, now)
		}
		if err := pki.Init(pos[0]); err != nil {
			return err
		}
		fmt.Printf("wrote CA, server certificate and tls-crypt key to %s\n", pos[0])
		return nil
	case "client":
		fs := newFlags("pki client", "DIR NAME -remote HOST:PORT [-remote HOST:PORT …]")
		var remotes stringList
		fs.Var(&remotes, "remote", "server address the client connects to (repeat for fallbacks)")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 2, 2); err != nil {
			return err
		}
		if len(remotes) == 0 {
			fmt.Fprintln(os.Stderr, "ovfwd pki client: -remote HOST:PORT is required")
			return errUsage
		}
		prof := pki.Profile{Name: pos[1], Remotes: remotes}
		// With a tls-crypt-v2 server key in DIR each client gets its own key.
		if text, err := os.ReadFile(filepath.Join(pos[0], pki.TLSCryptV2File)); err == nil {
			k, err := control.ParseTLSCryptV2ServerKey(text)
			if err != nil {
				return fmt.Errorf("%s: %w", pki.TLSCryptV2File, err)
			}
			if prof.TLSCryptV2, err = k.NewTLSCryptV2ClientKey(time.Now()); err != nil {
				return err
			}
		}
		path, err := pki.ClientProfile(pos[0], prof)
		if err != nil {
			return err
		}
		fmt.Println(path)
		return nil
	case "site":
		// A certificate and key as files, for the [[vpn.client]] uplink of
		// another ovfwd (a site-to-site peer) that connects to this CA's
		// server; pair it with a [[vpn.iroute]] on the server.
		fs := newFlags("pki site", "DIR NAME")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 2, 2); err != nil {
			return err
		}
		cert, key, err := pki.ClientFiles(pos[0], pos[1])
		if err != nil {
			return err
		}
		fmt.Printf("%s\n%s\n", cert, key)
		return nil
	case "tls-crypt-v2":
		fs := newFlags("pki tls-crypt-v2", "DIR")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 1, 1); err != nil {
			return err
		}
		path := filepath.Join(pos[0], pki.TLSCryptV2File)
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("%s already exists", path)
		}
		k, err := control.GenerateTLSCryptV2ServerKey()
		if err != nil {
			return err
		}
		text, _ := k.MarshalText()
		if err := os.WriteFile(path, text, 0o600); err != nil {
			return err
		}
		fmt.Printf("%s\n(set tls_crypt_v2 = %q in [vpn]; profiles made with pki client from now on carry their own keys)\n", path, path)
		return nil
	case "revoke":
		fs := newFlags("pki revoke", "DIR NAME [-cert FILE]")
		certFile := fs.String("cert", "", "revoke this certificate file instead of the one(s) found for NAME")
		pos, err := parse(fs, args[1:])
		if err != nil {
			return err
		}
		if err := wantArgs(fs, pos, 2, 2); err != nil {
			return err
		}
		path, err := pki.Revoke(pos[0], pos[1], *certFile)
		if err != nil {
			return err
		}
		fmt.Printf("%s\n(a server with crl = %q applies it within a second; connected sessions of %s are closed)\n", path, path, pos[1])
		return nil
	case "-h", "-help", "--help":
		fmt.Print(pkiUsage)
		return nil
	}
	fmt.Fprintf(os.Stderr, "ovfwd pki: unknown subcommand %q (init, client, site, revoke or tls-crypt-v2)\n", args[0])
	return errUsage
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func benchCmd(args []string) error {
	const synopsis = "usage: ovfwd bench fwd|vpn|mlx5 [flags]\n"
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, synopsis)
		return errUsage
	}
	switch args[0] {
	case "fwd":
		fs := newFlags("bench fwd", "[-rounds N] [-duration D] [-gen afxdp|afpacket|xdp] [-gen-only] [-bridge|-nat] [-no-fast-path] [-bare] [-prog-stats]")
		var o bench.FwdOptions
		fs.IntVar(&o.Rounds, "rounds", 0, "A B pairs (default 3)")
		fs.DurationVar(&o.Duration, "duration", 0, "measured time per run (default 3s)")
		fs.IntVar(&o.GenCPU, "gen-cpu", 0, "the generator's CPU")
		fs.IntVar(&o.FwdCPU, "fwd-cpu", 0, "the forwarding CPU (default 1)")
		fs.BoolVar(&o.NAT, "nat", false, "translate the source: ovfwd NAT44 vs Linux nftables masquerade")
		fs.BoolVar(&o.NoFastPath, "no-fast-path", false, "ovfwd without the XDP fast path (every frame through the worker)")
		fs.BoolVar(&o.Bridge, "bridge", false, "bridge instead of route: ovfwd bridge mode vs a Linux bridge")
		fs.StringVar(&o.Gen, "gen", "", "generator: afxdp (AF_XDP TX of prebuilt frames), afpacket (sendmmsg) or xdp (XDP live frames: the appliance receives xdp_frames, as from a NIC); default xdp where the kernel runs live frames (5.18+; some refuse them even to root), else afxdp, else afpacket; the report names the generator and why it fell back")
		fs.IntVar(&o.GenThreads, "gen-threads", 0, "generator threads on the generator's CPU (default: xdp 1, afxdp 1, afpacket 2)")
		fs.IntVar(&o.Flows, "flows", 0, "distinct UDP flows the generator cycles through (default 256)")
		fs.BoolVar(&o.GenOnly, "gen-only", false, "measure the generator alone, into an XDP_DROP counter on the appliance's ingress veth")
		fs.BoolVar(&o.Bare, "bare", false, "also measure a bare XDP redirect between the veths (the floor under the fast path)")
		fs.BoolVar(&o.LinuxXDPPass, "linux-xdp-pass", false, "with -gen xdp: give Linux's ingress veth NAPI with an XDP_PASS program instead of GRO")
		fs.BoolVar(&o.ProgStats, "prog-stats", false, "turn bpf_stats on and print the ingress XDP program's ns per run")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		_, err := bench.Fwd(ctx, os.Stdout, o)
		return err
	case "mlx5":
		fs := newFlags("bench mlx5", "[-packets N] [-runs N]")
		var o dpsim.BenchOptions
		fs.IntVar(&o.Packets, "packets", 0, "packets per run (default 65536)")
		fs.IntVar(&o.Runs, "runs", 0, "alternated runs per variant (default 7)")
		fs.IntVar(&o.Work, "work", 0, "extra per-packet work steps")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		return dpsim.Bench(os.Stdout, o)
	case "vpn":
		fs := newFlags("bench vpn", "[-clients N] [-payload BYTES] [-duration D] [-runs N] [-target ovfwd|openvpn|both] [-ovfwd-b BIN] | -tcp [-rounds N] [-duration D] [-cipher C]")
		tcp := fs.Bool("tcp", false, "one openvpn client's TCP throughput and the server's CPU s/GB instead of the many-client UDP load")
		var lo vpnload.Options
		var to vpnbench.Options
		fs.StringVar(&lo.Target, "target", "both", "ovfwd, openvpn, or both (alternating)")
		fs.IntVar(&lo.Clients, "clients", 100, "concurrent clients, each with a real handshake")
		fs.IntVar(&lo.PayloadSize, "payload", 64, "UDP payload bytes")
		dur := fs.Duration("duration", 0, "traffic per run (default 5s; with -tcp 10s per direction)")
		fs.IntVar(&lo.Runs, "runs", 3, "runs per server")
		fs.IntVar(&lo.PerClientPPS, "pps", 0, "offered packets/s per client (0: as fast as the generator can)")
		fs.StringVar(&lo.OvfwdPoll, "poll", "", "ovfwd worker poll mode (busy or adaptive)")
		fs.BoolVar(&lo.IngressOnServer, "ingress-on-server", false, "run the server port's receive work on the server's CPU (ovfwd: threaded NAPI pinned there; openvpn: RPS), as bench fwd does")
		fs.StringVar(&lo.OvfwdBinB, "ovfwd-b", "", "A/B: a second ovfwd binary, run after each ovfwd run (target ovfwd-b) with the same settings")
		fs.StringVar(&lo.Generator, "gen", "raw", "traffic generator: raw (packet sockets) or socket (each client's UDP socket)")
		fs.IntVar(&lo.GenThreads, "gen-threads", 0, "raw generator threads (default 4)")
		fs.IntVar(&lo.GenPresealMB, "gen-preseal", 0, "raw generator: MB of packets sealed before each unpaced run (default 256; -1: seal on the fly)")
		fs.IntVar(&to.Rounds, "rounds", 2, "with -tcp: A B pairs")
		fs.StringVar(&to.Cipher, "cipher", "AES-256-GCM", "with -tcp: data cipher of both servers")
		if err := parseFlags(fs, args[1:]); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		if *tcp {
			to.Duration = *dur
			_, err := vpnbench.Run(ctx, os.Stdout, to)
			return err
		}
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		lo.OvfwdBin, lo.Duration = exe, *dur
		_, err = vpnload.Run(ctx, os.Stdout, lo)
		return err
	case "-h", "-help", "--help":
		fmt.Print(synopsis)
		return nil
	}
	fmt.Fprintf(os.Stderr, "ovfwd bench: unknown benchmark %q\n%s", args[0], synopsis)
	return errUsage
}

func probeCmd(args []string) error {
	fs := newFlags("probe", "[-pci ADDR]")
	pci := fs.String("pci", "", "PCI function to bring up (default: every vfio-pci bound ConnectX)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return mlx5.Probe(os.Stdout, *pci)
}

func versionCmd(args []string) error {
	fs := newFlags("version", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Println("ovfwd", version.Version)
	return nil
}

// drainCmd starts or ends a drain through the status socket (root and
// the daemon's group only; see status.Authorized).
func drainCmd(args []string) error {
	fs := newFlags("drain", "[-s SOCKET | -c FILE] [-deadline D] [-cancel]")
	socketPath := socketFlags(fs)
	deadline := fs.Duration("deadline", 0, "tell the clients still connected after this long to reconnect elsewhere (0: wait until they leave)")
	cancel := fs.Bool("cancel", false, "end the drain: announce the routes and admit clients again")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	sock, err := socketPath()
	if err != nil {
		return err
	}
	dr, err := status.StartDrain(sock, *deadline, *cancel, 5*time.Second)
	if err != nil {
		return err
	}
	switch {
	case *cancel:
		fmt.Println("drain ended: routes announced again, new clients admitted")
	case dr != nil && !dr.Deadline.IsZero():
		fmt.Printf("draining: routes withdrawn, new clients sent elsewhere; clients left at %s are told to reconnect elsewhere\n", dr.Deadline.Format(time.RFC3339))
	default:
		fmt.Println("draining: routes withdrawn, new clients sent elsewhere; connected clients stay until they leave")
	}
	return nil
}
