package bench

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/appliance/afxdp"
	"golang.org/x/sys/unix"
)

// The generators (FwdOptions.Gen). Both send the topology's flow set,
// pinned to GenCPU, for both sides alike.
const (
	genAFXDP    = "afxdp"
	genAFPacket = "afpacket"
)

type generator interface {
	run(budget uint64, deadline time.Time, stop *atomic.Bool, c *genCounters) unix.Errno
	close()
}

// genCounters are what the generator threads add up, a few times per
// thousand frames: frames sent, send calls, and the calls that stalled —
// ended early because the receiving side was full (a frame dropped at the
// veth peer, or the socket's send buffer full of frames not yet taken). A
// generator that stalls often is not what limits the rate.
type genCounters struct{ sent, calls, stalled atomic.Uint64 }

// newGen opens generator thread q's socket in the calling thread (which is
// in the generator's namespace). An AF_XDP thread sends on TX queue q.
func newGen(t *topology, o FwdOptions, q int) (generator, error) {
	switch o.Gen {
	case genAFXDP:
		return newXDPGen(t.genIf, q, t.frames)
	case genXDP:
		return newLiveGen(t.genIf, t.frames)
	}
	return newGenThread(t.genIf, t.frames)
}

// pickGen settles o.Gen and o.GenThreads and says what the report prints:
// the generator and, if the default one could not run, why it fell back.
// Without a choice: XDP live frames where the kernel has them (Linux
// 5.18+), because the appliance then receives frames as a NIC's driver
// hands them to XDP; a socket generator's frames arrive as skbs that veth
// copies into a page before XDP runs and whose TX completion runs on the
// appliance's CPU, a cost every side pays that no NIC imposes
// (veth_convert_skb_to_xdp_buff, xsk_destruct_skb in the kernel). Else
// AF_XDP (one sendto per ring of descriptors), else AF_PACKET. Each is
// tried by opening it once in the generator's namespace.
func pickGen(t *topology, o *FwdOptions) (desc, fallback string, err error) {
	if o.Gen == "" {
		o.Gen = genXDP
		if err := t.gen.Do(func() error { return tryGen(newLiveGen(t.genIf, t.frames)) }); err != nil {
			o.Gen, fallback = genAFXDP, fmt.Sprintf("XDP live frames refused (%v)", err)
			if err := t.gen.Do(func() error { return tryGen(newXDPGen(t.genIf, 0, t.frames)) }); err != nil {
				o.Gen, fallback = genAFPacket, fallback+fmt.Sprintf("; AF_XDP refused (%v)", err)
			}
		}
	}
	if fallback != "" {
		fallback = "default generator fell back to " + o.Gen + ": " + fallback
	}
	if o.Gen == genXDP {
		if o.GenThreads == 0 {
			o.GenThreads = 1
		}
		return fmt.Sprintf("%s: %d XDP live-frames thread(s) (BPF_PROG_TEST_RUN redirecting out of bnA0: the appliance receives xdp_frames, no skb; Linux's bnA1 runs NAPI for them, GRO on) on CPU %d", o.Gen, o.GenThreads, o.GenCPU), fallback, nil
	}
	if o.Gen == genAFXDP {
		if o.GenThreads == 0 {
			o.GenThreads = 1
		}
		out, err := t.gen.Run("ls", "/sys/class/net/bnA0/queues")
		if err != nil {
			return "", "", err
		}
		if n := strings.Count(out, "tx-"); o.GenThreads > n {
			return "", "", fmt.Errorf("bench: %d AF_XDP generator threads, one per TX queue, but bnA0 has %d", o.GenThreads, n)
		}
		return fmt.Sprintf("%s: %d AF_XDP copy-mode TX thread(s), one per TX queue, of prebuilt frames, up to %d per sendto, on CPU %d", o.Gen, o.GenThreads, xdpGenBudget, o.GenCPU), fallback, nil
	}
	if o.GenThreads == 0 {
		o.GenThreads = 2
	}
	return fmt.Sprintf("%s: %d AF_PACKET sendmmsg threads (%d frames per call, qdisc bypass) on CPU %d", o.Gen, o.GenThreads, genBatch, o.GenCPU), fallback, nil
}

// tryGen closes a generator that opened and passes on why one did not.
func tryGen[G generator](g G, err error) error {
	if err == nil {
		g.close()
	}
	return err
}

// runGenOnly measures the generator into an XDP_DROP counter on bnA1, the
// appliance's ingress veth, its NAPI made a thread and pinned to FwdCPU as
// in ovfwd's runs (or RPS, if the counter could attach only in generic
// mode): what the generator can offer when nothing behind it forwards.
func runGenOnly(ctx context.Context, t *topology, o FwdOptions) (Run, error) {
	var c *afxdp.DropCounter
	var mode afxdp.AttachMode
	err := t.app.Do(func() (err error) {
		if c, err = afxdp.NewDropCounter(); err != nil {
			return err
		}
		ifi, err := net.InterfaceByName("bnA1")
		if err == nil {
			mode, err = c.Attach(ifi.Index, afxdp.ModeNative)
		}
		if err != nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		return Run{}, err
	}
	defer c.Close()
	var threads []string
	switch {
	case o.IngressOnGenCPU:
	case mode == afxdp.ModeGeneric:
		if err := steerRPS(t, o); err != nil {
			return Run{}, err
		}
		defer unsteerRPS(t)
	default:
		pid, unthread, err := threadIngressNAPI(t, o.FwdCPU)
		if err != nil {
			return Run{}, err
		}
		defer unthread()
		threads = napiThreads(pid)
	}
	return measure(ctx, t, c, o, "gen", threads, nil, nil)
}
