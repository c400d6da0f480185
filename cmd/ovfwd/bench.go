package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ovfwd/ovfwd/appliance/testbed/bench"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpnbench"
	"github.com/ovfwd/ovfwd/appliance/testbed/vpnload"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
)

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
