package afxdp

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// AttachMode is how an XDP program is attached to a device.
type AttachMode uint8

const (
	ModeNative  AttachMode = iota + 1 // XDP_FLAGS_DRV_MODE: in the driver
	ModeGeneric                       // XDP_FLAGS_SKB_MODE: after the skb is built
)

func (m AttachMode) String() string {
	switch m {
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return "none"
}

func (m AttachMode) flags() link.XDPAttachFlags {
	if m == ModeGeneric {
		return link.XDPGenericMode
	}
	return link.XDPDriverMode
}

// Names of the steering program's maps, which are also the symbols its
// map loads reference until loadSteering associates the real maps.
const (
	mapXSKs    = "ovfwd_xsks"
	mapLocal4  = "ovfwd_local4"
	mapLocal6  = "ovfwd_local6"
	mapNAT     = "ovfwd_nat"
	mapNATFrag = "ovfwd_natfrag"
)

// Steering is the XDP program that splits a port's traffic between ovfwd
// (redirected to the queue's AF_XDP socket) and the kernel (XDP_PASS):
//
//   - IPv4/IPv6 to one of the local addresses (SetLocal) goes to the
//     kernel — SSH, ping to the box, the VPN control channel — except UDP to
//     the VPN port whose first payload byte carries opcode P_DATA_V2, which
//     is ovfwd's data plane, and neighbour solicitations/advertisements,
//     because ovfwd owns neighbour discovery as it owns ARP, and, while a
//     NAT port range is set (SetNAT), what NAT owns: TCP/UDP to a port in
//     the range (not the VPN port), ICMP echo replies whose identifier is
//     in it, ICMP errors quoting a TCP/UDP source port or echo identifier
//     in it, and the later fragments of a first fragment it claimed
//     (remembered by source, destination, IP ID and protocol in an LRU
//     map of natFragEntries). Other fragments
//     (IPv4 with MF or an offset; IPv6 with a Fragment header) are the
//     kernel's even to the VPN port: it reassembles them, with its own
//     bounds (net.ipv4.ipfrag_*, net.ipv6.ip6frag_*), for its socket;
//   - everything else (transit, ARP, ND, malformed) goes to ovfwd, which
//     counts what it drops.
//
// If a queue has no socket in the XSKMAP, frames fall back to XDP_PASS.
type Steering struct {
	mu      sync.Mutex
	xsks    *ebpf.Map // BPF_MAP_TYPE_XSKMAP, queue -> socket
	local4  *ebpf.Map // hash: IPv4 address -> 1
	local6  *ebpf.Map // hash: IPv6 address -> 1
	nat     *ebpf.Map // array[1]: NAT port range lo | hi<<16; 0 = no NAT
	natFrag *ebpf.Map // LRU hash: first fragments NAT claimed (natFragKey) -> 1
	vpnPort uint16
	prog    *ebpf.Program
	link    link.Link
	mode    AttachMode
	local   map[netip.Addr]bool
	closed  bool
	fast    *fastPort // nil: no fast path in the program
	fastErr error     // why the program has no fast path although one was asked for
}

const maxLocalAddrs = 256

// NewSteering builds and loads the program for a device with queues
// queues; vpnPort 0 means no VPN data channel on this port. It is not
// attached yet.
func NewSteering(queues int, vpnPort uint16) (*Steering, error) {
	return newSteering(queues, vpnPort, nil)
}

// newSteering is NewSteering with the fast path's tables fp (nil: none) in
// the program, off until SetFast turns it on.
func newSteering(queues int, vpnPort uint16, fp *FastPath) (*Steering, error) {
	s := &Steering{vpnPort: vpnPort, local: map[netip.Addr]bool{}}
	var err error
	if fp != nil {
		if s.fast, err = newFastPort(fp); err != nil {
			return nil, err
		}
	}
	if s.xsks, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapXSKs, Type: ebpf.XSKMap, KeySize: 4, ValueSize: 4, MaxEntries: uint32(max(queues, 1))}); err != nil {
		return nil, s.fail(fmt.Errorf("afxdp: create map %s: %w", mapXSKs, err))
	}
	if s.local4, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapLocal4, Type: ebpf.Hash, KeySize: 4, ValueSize: 4, MaxEntries: maxLocalAddrs}); err != nil {
		return nil, s.fail(fmt.Errorf("afxdp: create map %s: %w", mapLocal4, err))
	}
	if s.local6, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapLocal6, Type: ebpf.Hash, KeySize: 16, ValueSize: 4, MaxEntries: maxLocalAddrs}); err != nil {
		return nil, s.fail(fmt.Errorf("afxdp: create map %s: %w", mapLocal6, err))
	}
	if s.nat, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapNAT, Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}); err != nil {
		return nil, s.fail(fmt.Errorf("afxdp: create map %s: %w", mapNAT, err))
	}
	if s.natFrag, err = ebpf.NewMap(&ebpf.MapSpec{Name: mapNATFrag, Type: ebpf.LRUHash, KeySize: 12, ValueSize: 4, MaxEntries: natFragEntries}); err != nil {
		return nil, s.fail(fmt.Errorf("afxdp: create map %s: %w", mapNATFrag, err))
	}
	s.prog, err = s.load("ovfwd_steer", false)
	if err != nil && s.fast != nil {
		// The fast path needs more of the verifier than steering alone
		// (bounded loops, bpf_redirect_map into a DEVMAP_HASH, packet
		// rewrites), and an older kernel's verifier refuses what a later
		// one accepts: steer without it, and say why (FastRefused).
		s.fastErr = err
		s.fast.close()
		s.fast = nil
		s.prog, err = s.load("ovfwd_steer", false)
	}
	if err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

// load loads the steering program over s's maps; verdictOnly is the test
// shape (see steeringProgram).
func (s *Steering) load(name string, verdictOnly bool) (*ebpf.Program, error) {
	insns := steeringProgram(s.vpnPort, verdictOnly, s.fast != nil)
	maps := map[string]*ebpf.Map{mapXSKs: s.xsks, mapLocal4: s.local4, mapLocal6: s.local6, mapNAT: s.nat, mapNATFrag: s.natFrag}
	if s.fast != nil {
		for sym, m := range s.fast.maps() {
			maps[sym] = m
		}
	}
	for sym, m := range maps {
		if err := insns.AssociateMap(sym, m); err != nil && !errors.Is(err, asm.ErrUnreferencedSymbol) {
			return nil, fmt.Errorf("afxdp: program %s: map %s: %w", name, sym, err)
		}
	}
	return loadProgram(name, insns)
}

// loadProgram is loadXDP; tests replace it to inject a verifier's refusal.
var loadProgram = loadXDP

// loadXDP loads an XDP program; on a verifier error the message carries
// the verifier log (cilium/ebpf's VerifierError).
func loadXDP(name string, insns asm.Instructions) (*ebpf.Program, error) {
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         name,
		Type:         ebpf.XDP,
		License:      "GPL", // bpf_redirect_map is GPL-only
		Instructions: insns,
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("afxdp: load program %s: %+v", name, ve)
		}
		return nil, fmt.Errorf("afxdp: load program %s: %w", name, err)
	}
	return p, nil
}

func (s *Steering) fail(err error) error {
	s.Close()
	return err
}

// Attached is how an XDP program got attached.
type Attached struct {
	Mode      AttachMode
	NativeErr error // why native mode was refused, when generic was taken instead
}

// Attach attaches the program to ifindex: native first, then generic
// (unless want names one).
func (s *Steering) Attach(ifindex int, want AttachMode) (Attached, error) {
	return attachXDP(&s.link, &s.mode, s.prog, ifindex, want)
}

// linkXDP is link.AttachXDP; tests replace it to inject a driver's refusal
// of native mode.
var linkXDP = link.AttachXDP

// attachXDP attaches prog with a bpf_link, which detaches the program in
// whatever mode it was attached when it is closed, and cannot be left
// behind by a crash either: the kernel drops the link with the process's
// last fd. A netlink detach would have to name the mode: one with flags 0
// targets native mode only and never finds a generic-mode program.
// Native mode is refused by a driver without ndo_bpf (net/core/dev.c
// dev_xdp_attach: "Underlying driver does not support XDP in native
// mode", EOPNOTSUPP) or one that rejects the program or MTU; generic mode
// runs after the skb is built and works on every device.
func attachXDP(l *link.Link, got *AttachMode, prog *ebpf.Program, ifindex int, want AttachMode) (Attached, error) {
	var a Attached
	if want == 0 || want == ModeNative {
		lk, e := linkXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: ModeNative.flags()})
		if e == nil {
			*l, *got = lk, ModeNative
			return Attached{Mode: ModeNative}, nil
		}
		a.NativeErr = e
		if want == ModeNative {
			return a, fmt.Errorf("afxdp: attach native XDP to ifindex %d: %w", ifindex, e)
		}
	}
	lk, e := linkXDP(link.XDPOptions{Program: prog, Interface: ifindex, Flags: ModeGeneric.flags()})
	if e != nil {
		return a, fmt.Errorf("afxdp: attach generic XDP to ifindex %d: %w (native: %v)", ifindex, e, a.NativeErr)
	}
	*l, *got = lk, ModeGeneric
	a.Mode = ModeGeneric
	return a, nil
}

// FastRefused is why the program has no fast path although it was built
// with one (the kernel refused that program); nil otherwise.
func (s *Steering) FastRefused() error { return s.fastErr }

// SetFast turns the fast path on or off for this port (ingress MAC mac;
// puntSYN sends TCP SYNs to the engine, for MSS clamping). The program
// must have been built with a FastPath.
func (s *Steering) SetFast(on bool, mac []byte, puntSYN bool) error {
	if s.fast == nil {
		return errors.New("afxdp: steering program has no fast path")
	}
	return s.fast.set(on, mac, puntSYN)
}

// SetFastBridge turns the bridge fast path on or off for this port: port
// is its engine index, pvid its untagged VLAN, mac its own address (frames
// to it stay the engine's). The program must have been built with a
// FastPath.
func (s *Steering) SetFastBridge(on bool, mac []byte, port int, pvid uint16) error {
	if s.fast == nil {
		return errors.New("afxdp: steering program has no fast path")
	}
	return s.fast.setBridge(on, mac, port, pvid)
}

// FastStats reads the port's fast-path counters (zero without a fast path).
func (s *Steering) FastStats() ([NumFastStats]uint64, error) {
	if s.fast == nil {
		return [NumFastStats]uint64{}, nil
	}
	return s.fast.counts()
}

// Mode is the mode the program is attached in (0 if not attached).
func (s *Steering) Mode() AttachMode { return s.mode }

// Register puts socket fd in queue's slot of the XSKMAP.
func (s *Steering) Register(queue, fd int) error {
	return s.xsks.Put(uint32(queue), uint32(fd))
}

// SetLocal replaces the set of the kernel's own addresses on this port:
// traffic to them goes to the kernel (except VPN data).
func (s *Steering) SetLocal(addrs []netip.Addr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[netip.Addr]bool{}
	for _, a := range addrs {
		want[a.Unmap()] = true
	}
	var errs []error
	for a := range want {
		if !s.local[a] {
			if err := s.localMap(a).Put(a.AsSlice(), uint32(1)); err != nil {
				errs = append(errs, fmt.Errorf("afxdp: add local %s: %w", a, err))
				continue
			}
			s.local[a] = true
		}
	}
	for a := range s.local {
		if !want[a] {
			if err := s.localMap(a).Delete(a.AsSlice()); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, fmt.Errorf("afxdp: remove local %s: %w", a, err))
			}
			delete(s.local, a)
		}
	}
	return errors.Join(errs...)
}

// SetNAT makes the program hand ovfwd what NAT owns on the local IPv4
// addresses: ports lo..hi (see Steering); 0, 0 turns it off.
func (s *Steering) SetNAT(lo, hi uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("afxdp: steering closed")
	}
	if err := s.nat.Put(uint32(0), uint32(lo)|uint32(hi)<<16); err != nil {
		return fmt.Errorf("afxdp: set NAT range: %w", err)
	}
	return nil
}

func (s *Steering) localMap(a netip.Addr) *ebpf.Map {
	if a.Is4() {
		return s.local4
	}
	return s.local6
}

// ProgramID is the kernel's id of the loaded program.
func (s *Steering) ProgramID() (uint32, error) { return programID(s.prog) }

func programID(p *ebpf.Program) (uint32, error) {
	info, err := p.Info()
	if err != nil {
		return 0, err
	}
	id, ok := info.ID()
	if !ok {
		return 0, errors.New("afxdp: kernel reports no program id")
	}
	return uint32(id), nil
}

// ProgramExists reports whether a BPF program with this id is still loaded
// anywhere (BPF_PROG_GET_FD_BY_ID).
func ProgramExists(id uint32) bool {
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return !errors.Is(err, unix.ENOENT)
	}
	p.Close()
	return true
}

// Close detaches the program (by closing its link) and frees the maps.
func (s *Steering) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.link != nil {
		errs = append(errs, s.link.Close())
		s.link = nil
	}
	if s.prog != nil {
		errs = append(errs, s.prog.Close())
	}
	for _, m := range []*ebpf.Map{s.xsks, s.local4, s.local6, s.nat, s.natFrag} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	s.prog, s.xsks, s.local4, s.local6, s.nat, s.natFrag = nil, nil, nil, nil, nil, nil
	if s.fast != nil {
		errs = append(errs, s.fast.close())
		s.fast = nil
	}
	s.mode = 0
	return errors.Join(errs...)
}

// steeringProgram emits the program described on Steering. Map loads
// reference the maps by name (mapXSKs, mapLocal4, mapLocal6). With fast,
// transit IPv4 and IPv6 go through the fast path (fastPath4, fastPath6)
// before ovfwd.
// Registers: r6 ctx, r7 L3 header, r8 L4 header, r9 data_end.
// With verdictOnly the "to ovfwd" exit returns XDP_TX instead of
// redirecting, so BPF_PROG_TEST_RUN can tell the two outcomes apart.
func steeringProgram(vpnPort uint16, verdictOnly, fast bool) asm.Instructions {
	transit4, transit6 := "ovfwd", "ovfwd"
	if fast {
		transit4, transit6 = "fp4", "fp6"
	}
	const (
		r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10 = asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R5, asm.R6, asm.R7, asm.R8, asm.R9, asm.R10
		W, H, B, DW                                 = asm.Word, asm.Half, asm.Byte, asm.DWord
	)
	p := asm.Instructions{
		asm.Mov.Reg(r6, r1),
		asm.LoadMem(r2, r6, xdpMDData, W),
		asm.LoadMem(r9, r6, xdpMDDataEnd, W),
		// Ethernet header, one optional 802.1Q tag.
		asm.Mov.Reg(r7, r2),
		asm.Add.Imm(r7, ethHeaderLen),
		asm.JGT.Reg(r7, r9, "ovfwd"),
		asm.LoadMem(r3, r2, 12, H),
		asm.JNE.Imm(r3, be16(ethTypeVLAN), "l3"),
		asm.Add.Imm(r7, vlanHeaderLen),
		asm.JGT.Reg(r7, r9, "ovfwd"),
		asm.LoadMem(r3, r2, 16, H),
		asm.JEq.Imm(r3, be16(ethTypeIPv4), "ipv4").WithSymbol("l3"),
		asm.JEq.Imm(r3, be16(ethTypeIPv6), "ipv6"),
		asm.Ja.Label("ovfwd"),

		// IPv4: local destination? Then UDP to the VPN port with P_DATA_V2
		// is ours, the rest the kernel's. Every fragment (more follow, or
		// an offset) goes to the kernel, which reassembles them for its
		// socket on the VPN port; the daemon hands a reassembled P_DATA_V2
		// to the data plane (daemon's vpn reader, fwd.Engine.InjectReceived).
		asm.Mov.Reg(r2, r7).WithSymbol("ipv4"),
		asm.Add.Imm(r2, 20),
		asm.JGT.Reg(r2, r9, "ovfwd"),
		asm.LoadMem(r2, r7, 16, W),
		asm.StoreMem(r10, -4, r2, W),
	}
	p = append(p, lookup(mapLocal4, -4)...)
	p = append(p,
		asm.JEq.Imm(r0, 0, transit4),

		// NAT (SetNAT): r5 = lo | hi<<16, r8 = the transport header.
		asm.StoreImm(r10, -8, 0, W),
	)
	p = append(p, lookup(mapNAT, -8)...)
	p = append(p,
		asm.JEq.Imm(r0, 0, "vpn4"),
		asm.LoadMem(r5, r0, 0, W),
		asm.JEq.Imm(r5, 0, "vpn4"),
		asm.LoadMem(r2, r7, 6, H),
		asm.And.Imm(r2, be16(ipv4FragOffset)),
		asm.JNE.Imm(r2, 0, "nat_later"),
		asm.LoadMem(r2, r7, 0, B),
		asm.And.Imm(r2, 0x0f),
		asm.LSh.Imm(r2, 2),
		asm.Mov.Reg(r8, r7),
		asm.Add.Reg(r8, r2),
		asm.LoadMem(r3, r7, 9, B),
		asm.JEq.Imm(r3, ipProtoTCP, "nat_l4"),
		asm.JEq.Imm(r3, ipProtoUDP, "nat_l4"),
		asm.JEq.Imm(r3, ipProtoICMP, "nat_icmp"),
		asm.Ja.Label("vpn4"),

		// TCP/UDP: the destination port, unless it is the VPN's.
		asm.Mov.Reg(r2, r8).WithSymbol("nat_l4"),
		asm.Add.Imm(r2, 4),
		asm.JGT.Reg(r2, r9, "vpn4"),
		asm.LoadMem(r2, r8, 2, H),
		asm.HostTo(asm.BE, r2, asm.Half),
		asm.JEq.Imm(r2, int32(vpnPort), "vpn4"),
		asm.Ja.Label("nat_range"),

		// ICMP: an echo reply's identifier, or what an error quotes.
		asm.Mov.Reg(r2, r8).WithSymbol("nat_icmp"),
		asm.Add.Imm(r2, 8),
		asm.JGT.Reg(r2, r9, "vpn4"),
		asm.LoadMem(r3, r8, 0, B),
		asm.JEq.Imm(r3, icmpEchoReply, "nat_echo"),
		asm.JEq.Imm(r3, icmpUnreachable, "nat_err"),
		asm.JEq.Imm(r3, icmpSourceQuench, "nat_err"),
		asm.JEq.Imm(r3, icmpTimeExceeded, "nat_err"),
		asm.JEq.Imm(r3, icmpParamProblem, "nat_err"),
		asm.Ja.Label("vpn4"),
		asm.LoadMem(r2, r8, 4, H).WithSymbol("nat_echo"),
		asm.HostTo(asm.BE, r2, asm.Half),
		asm.Ja.Label("nat_range"),
		// r4 = the quoted IP header, r3 = its transport header.
		asm.Mov.Reg(r4, r8).WithSymbol("nat_err"),
		asm.Add.Imm(r4, 8),
		asm.Mov.Reg(r2, r4),
		asm.Add.Imm(r2, 20),
		asm.JGT.Reg(r2, r9, "vpn4"),
		asm.LoadMem(r2, r4, 0, B),
		asm.And.Imm(r2, 0x0f),
		asm.LSh.Imm(r2, 2),
		asm.Mov.Reg(r3, r4),
		asm.Add.Reg(r3, r2),
		asm.Mov.Reg(r2, r3),
		asm.Add.Imm(r2, 8),
		asm.JGT.Reg(r2, r9, "vpn4"),
		asm.LoadMem(r2, r4, 9, B),
		asm.JEq.Imm(r2, ipProtoTCP, "nat_qport"),
		asm.JEq.Imm(r2, ipProtoUDP, "nat_qport"),
		asm.JEq.Imm(r2, ipProtoICMP, "nat_qid"),
		asm.Ja.Label("vpn4"),
		asm.LoadMem(r2, r3, 0, H).WithSymbol("nat_qport"),
		asm.HostTo(asm.BE, r2, asm.Half),
		asm.Ja.Label("nat_range"),
		asm.LoadMem(r2, r3, 4, H).WithSymbol("nat_qid"),
		asm.HostTo(asm.BE, r2, asm.Half),

		// r2 in lo..hi: ovfwd's.
		asm.Mov.Reg(r3, r5).WithSymbol("nat_range"),
		asm.And.Imm(r3, 0xffff),
		asm.JLT.Reg(r2, r3, "vpn4"),
		asm.Mov.Reg(r3, r5),
		asm.RSh.Imm(r3, 16),
		asm.JGT.Reg(r2, r3, "vpn4"),
		// A first fragment NAT claims: its later fragments (no ports)
		// follow it to ovfwd; the kernel keeps every other fragment.
		asm.LoadMem(r2, r7, 6, H),
		asm.And.Imm(r2, be16(ipv4FlagMF)),
		asm.JEq.Imm(r2, 0, "ovfwd"),
	)
	p = append(p, natFragKey(nil)...)
	p = append(p,
		asm.StoreImm(r10, -32, 1, W),
		asm.LoadMapPtr(r1, 0).WithReference(mapNATFrag),
		asm.Mov.Reg(r2, r10),
		asm.Add.Imm(r2, -24),
		asm.Mov.Reg(r3, r10),
		asm.Add.Imm(r3, -32),
		asm.Mov.Imm(r4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
		asm.Ja.Label("ovfwd"),
	)
	p = append(p, natFragKey([]string{"nat_later"})...)
	p = append(p, lookup(mapNATFrag, -24)...)
	p = append(p,
		asm.JNE.Imm(r0, 0, "ovfwd"),
		asm.Ja.Label("vpn4"),
	)
	if vpnPort == 0 {
		p = append(p, asm.Ja.Label("pass").WithSymbol("vpn4"))
	} else {
		p = append(p,
			asm.LoadMem(r2, r7, 9, B).WithSymbol("vpn4"),
			asm.JNE.Imm(r2, ipProtoUDP, "pass"),
			asm.LoadMem(r2, r7, 6, H),
			asm.And.Imm(r2, be16(ipv4FlagMF|ipv4FragOffset)),
			asm.JNE.Imm(r2, 0, "pass"),
			asm.LoadMem(r2, r7, 0, B),
			asm.And.Imm(r2, 0x0f),
			asm.LSh.Imm(r2, 2),
			asm.Mov.Reg(r8, r7),
			asm.Add.Reg(r8, r2),
			asm.Ja.Label("udp"),
		)
	}

	// IPv6: same, for a UDP header right after the fixed header (extension
	// headers go to the kernel).
	p = append(p,
		asm.Mov.Reg(r2, r7).WithSymbol("ipv6"),
		asm.Add.Imm(r2, ipv6HeaderLen),
		asm.JGT.Reg(r2, r9, "ovfwd"),
		asm.LoadMem(r2, r7, 24, DW),
		asm.StoreMem(r10, -16, r2, DW),
		asm.LoadMem(r2, r7, 32, DW),
		asm.StoreMem(r10, -8, r2, DW),
	)
	p = append(p, lookup(mapLocal6, -16)...)
	p = append(p,
		asm.JEq.Imm(r0, 0, transit6),
		asm.LoadMem(r2, r7, 6, B),
		asm.JEq.Imm(r2, ipProtoICMPv6, "icmp6"),
	)
	if vpnPort == 0 {
		p = append(p, asm.Ja.Label("pass"))
	} else {
		p = append(p,
			asm.JNE.Imm(r2, ipProtoUDP, "pass"),
			asm.Mov.Reg(r8, r7),
			asm.Add.Imm(r8, ipv6HeaderLen),

			// UDP to a local address: P_DATA_V2 to the VPN port is ovfwd's.
			asm.Mov.Reg(r2, r8).WithSymbol("udp"),
			asm.Add.Imm(r2, udpHeaderLen+1),
			asm.JGT.Reg(r2, r9, "pass"),
			asm.LoadMem(r2, r8, 2, H),
			asm.JNE.Imm(r2, be16(vpnPort), "pass"),
			asm.LoadMem(r2, r8, udpHeaderLen, B),
			asm.RSh.Imm(r2, openvpnOpcodeShift),
			asm.JEq.Imm(r2, openvpnPDataV2, "ovfwd"),
			asm.Ja.Label("pass"),
		)
	}

	p = append(p,
		// Neighbour discovery to a local address (NUD probes, the answers
		// to the kernel's own solicitations) is ovfwd's, like ARP: ovfwd
		// owns the neighbour table and mirrors it into the kernel.
		asm.Mov.Reg(r2, r7).WithSymbol("icmp6"),
		asm.Add.Imm(r2, ipv6HeaderLen+1),
		asm.JGT.Reg(r2, r9, "pass"),
		asm.LoadMem(r2, r7, ipv6HeaderLen, B),
		asm.JEq.Imm(r2, icmp6NeighborSolicit, "ovfwd"),
		asm.JEq.Imm(r2, icmp6NeighborAdvert, "ovfwd"),

		asm.Mov.Imm(r0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	)
	// To the engine: "ovfwd", which with the fast path is the bridge fast
	// path's entry, then the queue's socket at "xsk".
	xsk := "ovfwd"
	if fast {
		p = append(p, fastPath4(verdictOnly)...)
		p = append(p, fastPath6()...)
		p = append(p, fastBridge()...)
		xsk = "xsk"
	}

	// To the queue's socket; XDP_PASS if the queue has none.
	if verdictOnly {
		return append(p,
			asm.Mov.Imm(r0, xdpTX).WithSymbol(xsk),
			asm.Return(),
		)
	}
	return append(p,
		asm.LoadMapPtr(r1, 0).WithReference(mapXSKs).WithSymbol(xsk),
		asm.LoadMem(r2, r6, xdpMDRxQueueIndex, W),
		asm.Mov.Imm(r3, xdpPass),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	)
}

// lookup emits bpf_map_lookup_elem(m, r10+key): r0 = the value or 0.
func lookup(m string, key int32) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, 0).WithReference(m),
		asm.Mov.Reg(asm.R2, asm.R10),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
	}
}

// natFragKey stores an IPv4 packet's fragment key — source, destination,
// IP ID, protocol, a zero pad byte: 12 bytes at fp-24 — from the header at
// r7. With a label, the first instruction carries it.
func natFragKey(label []string) asm.Instructions {
	const r2, r7, r10 = asm.R2, asm.R7, asm.R10
	insns := asm.Instructions{
		asm.LoadMem(r2, r7, 12, asm.Word),
		asm.StoreMem(r10, -24, r2, asm.Word),
		asm.LoadMem(r2, r7, 16, asm.Word),
		asm.StoreMem(r10, -20, r2, asm.Word),
		asm.LoadMem(r2, r7, 4, asm.Half),
		asm.StoreMem(r10, -16, r2, asm.Half),
		asm.LoadMem(r2, r7, 9, asm.Byte),
		asm.StoreMem(r10, -14, r2, asm.Byte),
		asm.StoreImm(r10, -13, 0, asm.Byte),
	}
	if len(label) > 0 {
		insns[0] = insns[0].WithSymbol(label[0])
	}
	return insns
}

// natFragEntries bounds the first fragments the steering program
// remembers (LRU): enough for the fragmented datagrams in flight at once.
const natFragEntries = 4096
