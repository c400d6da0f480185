package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// FastPath is the XDP fast path's tables, shared by the steering programs
// of every port that has it: routed IPv4 and IPv6 whose next hop is
// resolved on an AF_XDP port is forwarded in the kernel (TTL and header
// checksum or hop limit updated, MACs rewritten, bpf_redirect_map to the
// egress device) and never reaches the engine. The engine stays the one source of truth: the control plane
// writes these maps from the tables it publishes (an LPM entry per route and
// per resolved host, a next hop per adjacency), and anything the tables do
// not say outright goes to the engine as before:
//
//   - a VLAN tag, not to the port's MAC, IPv4 options (IHL ≠ 5) or IPv6
//     extension headers, fragments, TTL or hop limit ≤ 1, a frame longer or shorter than the datagram
//     (Ethernet padding, truncation), a bad header checksum, protocols other
//     than TCP and UDP or a malformed TCP/UDP header, a TCP/UDP checksum
//     that holds only the pseudo-header sum (CHECKSUM_PARTIAL from a host
//     with offloads) over a segment longer than maxFinishLen, TCP SYN
//     while MSS clamping is on;
//   - a martian source or destination (fwd's martian.go; fastMartian4);
//   - no route, a next hop without an egress device (punt entries: the
//     box's own addresses, unresolved neighbours, tunnel, uplink, NAT'd or
//     tagged egress), a datagram over the egress MTU.
//
// A shorter unfinished checksum is finished in the kernel as the engine
// finishes it (fwd's finishPartialCsum) before the frame is forwarded.
// Each case is counted per ingress port (FastStats).
type FastPath struct {
	mu     sync.Mutex
	route4 *ebpf.Map // LPM trie: {prefixlen u32, addr [4]byte} -> next hop id
	route6 *ebpf.Map // LPM trie: {prefixlen u32, addr [16]byte} -> next hop id
	nh     *ebpf.Map // array: id -> fastNH
	devs   *ebpf.Map // devmap hash: ifindex -> ifindex (redirect targets)
	macs   *ebpf.Map // hash: fastMACKey -> fastMAC (bridge mode's learned MACs)
	// The engine's own addresses, for the martian test (fastMartian4/6):
	// own holds ownLast[256], a byte per last IPv4 address byte in use
	// (the cheap test every frame takes, as fwd's ownLast4), own4 and own6
	// the addresses themselves.
	own  *ebpf.Map // array[1]: [256]byte
	own4 *ebpf.Map // hash: IPv4 address -> 1
	own6 *ebpf.Map // hash: IPv6 address -> 1
}

// Map names, which are also the program's map symbols.
const (
	mapFPRoute4 = "ovfwd_fp_rt4"
	mapFPRoute6 = "ovfwd_fp_rt6"
	mapFPNH     = "ovfwd_fp_nh"
	mapFPDevs   = "ovfwd_fp_devs"
	mapFPMACs   = "ovfwd_fp_macs"
	mapFPOwn    = "ovfwd_fp_own"
	mapFPOwn4   = "ovfwd_fp_own4"
	mapFPOwn6   = "ovfwd_fp_own6"
	mapFPConf   = "ovfwd_fp_conf"
	mapFPStats  = "ovfwd_fp_stats"
	mapFPTest   = "ovfwd_fp_test"
)

const (
	maxFastRoutes   = 1 << 16
	maxFastNextHops = 1 << 12
	maxFastDevices  = 256
	maxFastMACs     = 1 << 16
	maxFastOwn      = 1 << 10 // the engine's own addresses, per family
)

// fastMACKey is a learned address as the program looks it up: the MAC,
// then the VLAN (native order), 8 bytes. fastMAC is its value, 12 bytes
// in native order: the egress ifindex (0: the engine's), the egress MTU
// (L3) and the engine port it was learned on. The ifindex comes first so
// the bridge path shares the routed path's counting and redirect tail,
// which read it at offset 0 as in a fastNH.
const (
	fastMACKeySize = 8
	fastMACSize    = 12
)

// fastNH is a next hop as the program reads it (native byte order, 24
// bytes): ifindex 0 means "punt to the engine".
//
//	0  ifindex u32
//	4  mtu     u32 (L3)
//	8  dst MAC, src MAC (12 bytes)
//	20 pad
const fastNHSize = 24

// xdpRedirect is XDP_REDIRECT (include/uapi/linux/bpf.h enum xdp_action):
// what bpf_redirect_map returns on success, and what the test-shaped program
// returns for a frame the fast path forwarded.
const xdpRedirect = 4

// FastNextHop is one adjacency of the fast path: frames go out of Ifindex
// with these MACs when their datagram fits MTU. Ifindex 0 sends them to
// the engine.
type FastNextHop struct {
	Ifindex  int
	MTU      int
	Dst, Src net.HardwareAddr
}

// NewFastPath creates the fast path's maps.
func NewFastPath() (*FastPath, error) {
	f := &FastPath{}
	var err error
	if f.route4, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPRoute4, Type: ebpf.LPMTrie, KeySize: 8, ValueSize: 4,
		MaxEntries: maxFastRoutes, Flags: unix.BPF_F_NO_PREALLOC}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPRoute4, err))
	}
	if f.route6, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPRoute6, Type: ebpf.LPMTrie, KeySize: 20, ValueSize: 4,
		MaxEntries: maxFastRoutes, Flags: unix.BPF_F_NO_PREALLOC}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPRoute6, err))
	}
	if f.nh, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPNH, Type: ebpf.Array, KeySize: 4, ValueSize: fastNHSize,
		MaxEntries: maxFastNextHops}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPNH, err))
	}
	if f.devs, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPDevs, Type: ebpf.DevMapHash, KeySize: 4, ValueSize: 4,
		MaxEntries: maxFastDevices}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPDevs, err))
	}
	if f.macs, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPMACs, Type: ebpf.Hash, KeySize: fastMACKeySize, ValueSize: fastMACSize,
		MaxEntries: maxFastMACs, Flags: unix.BPF_F_NO_PREALLOC}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPMACs, err))
	}
	if f.own, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPOwn, Type: ebpf.Array, KeySize: 4, ValueSize: 256, MaxEntries: 1}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPOwn, err))
	}
	if f.own4, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPOwn4, Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: maxFastOwn}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPOwn4, err))
	}
	if f.own6, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPOwn6, Type: ebpf.Hash, KeySize: 16, ValueSize: 4, MaxEntries: maxFastOwn}); err != nil {
		return nil, f.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPOwn6, err))
	}
	return f, nil
}

func (f *FastPath) fail(err error) error {
	f.Close()
	return err
}

// lpmKey is p as an LPM trie key: prefix length, then the address.
func lpmKey(p netip.Prefix) ([]byte, error) {
	if !p.IsValid() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return nil, fmt.Errorf("afxdp: fast path: bad prefix %v", p)
	}
	a := p.Masked().Addr().AsSlice()
	k := make([]byte, 4+len(a))
	binary.NativeEndian.PutUint32(k, uint32(p.Bits()))
	copy(k[4:], a)
	return k, nil
}

// lpmKey4 is lpmKey for an IPv4 prefix only.
func lpmKey4(p netip.Prefix) ([]byte, error) {
	if !p.Addr().Is4() {
		return nil, fmt.Errorf("afxdp: fast path: %v is not an IPv4 prefix", p)
	}
	return lpmKey(p)
}

func (f *FastPath) routes(p netip.Prefix) *ebpf.Map {
	if p.Addr().Is4() {
		return f.route4
	}
	return f.route6
}

// SetRoute points prefix p (IPv4 or IPv6) at next hop id.
func (f *FastPath) SetRoute(p netip.Prefix, id uint32) error {
	k, err := lpmKey(p)
	if err != nil {
		return err
	}
	if id >= maxFastNextHops {
		return fmt.Errorf("afxdp: fast path: next hop %d out of range", id)
	}
	return f.routes(p).Put(k, id)
}

// DeleteRoute removes prefix p (absent is not an error).
func (f *FastPath) DeleteRoute(p netip.Prefix) error {
	k, err := lpmKey(p)
	if err != nil {
		return err
	}
	if err := f.routes(p).Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// SetNextHop writes next hop id. The egress device must have been added
// (AddDevice) first; a next hop with Ifindex 0 punts.
func (f *FastPath) SetNextHop(id uint32, h FastNextHop) error {
	if id >= maxFastNextHops {
		return fmt.Errorf("afxdp: fast path: next hop %d out of range", id)
	}
	v := make([]byte, fastNHSize)
	if h.Ifindex != 0 {
		if len(h.Dst) != 6 || len(h.Src) != 6 || h.MTU <= 0 {
			return fmt.Errorf("afxdp: fast path: next hop %d: need both MACs and an MTU", id)
		}
		binary.NativeEndian.PutUint32(v[0:], uint32(h.Ifindex))
		binary.NativeEndian.PutUint32(v[4:], uint32(h.MTU))
		copy(v[8:], h.Dst)
		copy(v[14:], h.Src)
	}
	return f.nh.Put(id, v)
}

// AddDevice makes ifindex a redirect target.
func (f *FastPath) AddDevice(ifindex int) error {
	return f.devs.Put(uint32(ifindex), uint32(ifindex))
}

// RemoveDevice removes ifindex as a redirect target.
func (f *FastPath) RemoveDevice(ifindex int) error {
	if err := f.devs.Delete(uint32(ifindex)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	return nil
}

// Close frees the maps (programs that use them keep their references).
func (f *FastPath) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for _, m := range []*ebpf.Map{f.route4, f.route6, f.nh, f.devs, f.macs, f.own, f.own4, f.own6} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	f.route4, f.route6, f.nh, f.devs, f.macs, f.own, f.own4, f.own6 = nil, nil, nil, nil, nil, nil, nil, nil
	return errors.Join(errs...)
}

// FastStat indexes the per-port fast-path counters.
type FastStat int

const (
	FastForwarded    FastStat = iota // frames forwarded in the kernel
	FastBytes                        // their bytes
	FastCsumFinished                 // of those, frames whose unfinished TCP/UDP checksum the kernel finished
	FastPuntOptions
	FastPuntFragment
	FastPuntTTL
	FastPuntLength
	FastPuntChecksum
	FastPuntL4
	FastPuntSYN
	FastPuntNoRoute
	FastPuntNextHop // the route's next hop is the engine's: ours, tunnel, unresolved, NAT'd, link down…
	FastPuntMTU
	FastPuntPartial // unfinished TCP/UDP checksum over more than maxFinishLen bytes (the engine finishes it)
	FastPuntVLAN    // bridge: tagged, or the port has no untagged VLAN
	FastPuntFlood   // bridge: group or unknown destination (the engine floods)
	FastPuntLearn   // bridge: source not learned on this port (the engine learns it)
	FastPuntMartian // a martian address (fwd's martian.go): the engine drops and counts it
	NumFastStats
)

var fastStatNames = [NumFastStats]string{"forwarded", "bytes", "csum_finished", "punt_options", "punt_fragment", "punt_ttl",
	"punt_length", "punt_checksum", "punt_l4", "punt_syn", "punt_no_route", "punt_next_hop", "punt_mtu", "punt_csum_partial",
	"punt_vlan", "punt_flood", "punt_learn", "punt_martian"}

func (s FastStat) String() string {
	if s >= 0 && s < NumFastStats {
		return fastStatNames[s]
	}
	return fmt.Sprintf("fast_stat_%d", int(s))
}

// fastConf is a port's fast-path settings as the program reads them:
// its MAC, routing on/off, whether TCP SYNs go to the engine (MSS
// clamping), bridging on/off, and for bridging the port's untagged VLAN
// and engine port (native order).
//
//	0 MAC (6 bytes), 6 route, 7 punt SYN, 8 bridge, 10 PVID u16, 12 port u32
const fastConfSize = 16

// fastPort is one port's share of the fast path: the shared tables and
// its own settings and counters.
type fastPort struct {
	mu    sync.Mutex
	cur   [fastConfSize]byte
	fp    *FastPath
	conf  *ebpf.Map // array[1] fastConf
	stats *ebpf.Map // per-CPU array[NumFastStats] fastCount
	test  *ebpf.Map // array[1] u32: egress ifindex of the last redirect (test programs only)
}

func newFastPort(fp *FastPath) (*fastPort, error) {
	p := &fastPort{fp: fp}
	var err error
	if p.conf, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPConf, Type: ebpf.Array, KeySize: 4, ValueSize: fastConfSize, MaxEntries: 1}); err != nil {
		return nil, p.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPConf, err))
	}
	if p.stats, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPStats, Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: fastCountSize, MaxEntries: uint32(NumFastStats)}); err != nil {
		return nil, p.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPStats, err))
	}
	if p.test, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapFPTest, Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
		return nil, p.fail(fmt.Errorf("afxdp: create map %s: %w", mapFPTest, err))
	}
	return p, nil
}

func (p *fastPort) fail(err error) error {
	p.close()
	return err
}

func (p *fastPort) close() error {
	var errs []error
	for _, m := range []*ebpf.Map{p.conf, p.stats, p.test} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	p.conf, p.stats, p.test = nil, nil, nil
	return errors.Join(errs...)
}

func (p *fastPort) maps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{mapFPRoute4: p.fp.route4, mapFPRoute6: p.fp.route6, mapFPNH: p.fp.nh, mapFPDevs: p.fp.devs,
		mapFPMACs: p.fp.macs, mapFPOwn: p.fp.own, mapFPOwn4: p.fp.own4, mapFPOwn6: p.fp.own6,
		mapFPConf: p.conf, mapFPStats: p.stats, mapFPTest: p.test}
}

// set turns the port's routed fast path on or off.
func (p *fastPort) set(on bool, mac net.HardwareAddr, puntSYN bool) error {
	if len(mac) != 6 {
		return fmt.Errorf("afxdp: fast path: MAC %v", mac)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.cur
	copy(v[:], mac)
	v[6], v[7] = 0, 0
	if on {
		v[6] = 1
		if puntSYN {
			v[7] = 1
		}
	}
	return p.put(v)
}

// setBridge turns the port's bridge fast path on or off: port is its
// engine index, pvid its untagged VLAN.
func (p *fastPort) setBridge(on bool, mac net.HardwareAddr, port int, pvid uint16) error {
	if len(mac) != 6 || port < 0 {
		return fmt.Errorf("afxdp: fast path: MAC %v, port %d", mac, port)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.cur
	copy(v[:], mac)
	v[8] = 0
	if on {
		v[8] = 1
	}
	binary.NativeEndian.PutUint16(v[10:], pvid)
	binary.NativeEndian.PutUint32(v[12:], uint32(port))
	return p.put(v)
}

func (p *fastPort) put(v [fastConfSize]byte) error {
	if v == p.cur {
		return nil
	}
	if err := p.conf.Put(uint32(0), v[:]); err != nil {
		return err
	}
	p.cur = v
	return nil
}

// fastCount is one per-CPU counter as the program updates it: frames,
// and for FastForwarded their bytes, so that a forwarded frame costs one
// counter lookup (entry FastBytes stays unused).
type fastCount struct{ Frames, Bytes uint64 }

const fastCountSize = 16

// counts sums the per-CPU counters.
func (p *fastPort) counts() ([NumFastStats]uint64, error) {
	var out [NumFastStats]uint64
	for i := range out {
		if FastStat(i) == FastBytes {
			continue
		}
		var per []fastCount
		if err := p.stats.Lookup(uint32(i), &per); err != nil {
			return out, err
		}
		for _, v := range per {
			out[i] += v.Frames
			if FastStat(i) == FastForwarded {
				out[FastBytes] += v.Bytes
			}
		}
	}
	return out, nil
}
