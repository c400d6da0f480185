package afxdp

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

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

func (m AttachMode) flags() uint32 {
	if m == ModeGeneric {
		return unix.XDP_FLAGS_SKB_MODE
	}
	return unix.XDP_FLAGS_DRV_MODE
}

// Steering is the XDP program that splits a port's traffic between ovfwd
// (redirected to the queue's AF_XDP socket) and the kernel (XDP_PASS):
//
//   - IPv4/IPv6 to one of the local addresses (SetLocal) goes to the
//     kernel — SSH, ping to the box, the VPN control channel — except UDP to
//     the VPN port whose first payload byte carries opcode P_DATA_V2, which
//     is ovfwd's data plane, and neighbour solicitations/advertisements,
//     because ovfwd owns neighbour discovery as it owns ARP;
//   - everything else (transit, ARP, ND, malformed) goes to ovfwd, which
//     counts what it drops.
//
// If a queue has no socket in the XSKMAP, frames fall back to XDP_PASS.
type Steering struct {
	mu     sync.Mutex
	xsks   int // BPF_MAP_TYPE_XSKMAP, queue -> socket
	local4 int // hash: IPv4 address -> 1
	local6 int // hash: IPv6 address -> 1
	prog   int
	link   int
	mode   AttachMode
	local  map[netip.Addr]bool
	closed bool
}

const maxLocalAddrs = 256

// NewSteering builds and loads the program for a device with queues
// queues; vpnPort 0 means no VPN data channel on this port. It is not
// attached yet.
func NewSteering(queues int, vpnPort uint16) (*Steering, error) {
	s := &Steering{xsks: -1, local4: -1, local6: -1, prog: -1, link: -1, local: map[netip.Addr]bool{}}
	var err error
	if s.xsks, err = bpfMapCreate("ovfwd_xsks", unix.BPF_MAP_TYPE_XSKMAP, 4, 4, uint32(max(queues, 1))); err != nil {
		return nil, s.fail(err)
	}
	if s.local4, err = bpfMapCreate("ovfwd_local4", unix.BPF_MAP_TYPE_HASH, 4, 4, maxLocalAddrs); err != nil {
		return nil, s.fail(err)
	}
	if s.local6, err = bpfMapCreate("ovfwd_local6", unix.BPF_MAP_TYPE_HASH, 16, 4, maxLocalAddrs); err != nil {
		return nil, s.fail(err)
	}
	insns, err := steeringProgram(s.xsks, s.local4, s.local6, vpnPort, false).assemble()
	if err != nil {
		return nil, s.fail(err)
	}
	if s.prog, err = bpfProgLoad("ovfwd_steer", insns); err != nil {
		return nil, s.fail(err)
	}
	return s, nil
}

func (s *Steering) fail(err error) error {
	s.Close()
	return err
}

// Attach attaches the program to ifindex: native first, then generic. It
// returns the mode it got and, when native failed, why.
func (s *Steering) Attach(ifindex int, want AttachMode) (AttachMode, error, error) {
	return attachXDP(&s.link, &s.mode, s.prog, ifindex, want)
}

// attachXDP attaches prog through a bpf_link. Workaround for asavie/xdp
// defect 1 (feasibility.md §1): its Program.Detach detaches with flags 0,
// which targets native mode, and then waits forever for a generic-mode
// program to go. A bpf_link detaches the program in whatever mode it was
// attached when its fd is closed, and cannot be left behind by a crash
// either: the kernel drops the link with the process's last fd.
func attachXDP(link *int, got *AttachMode, progFD, ifindex int, want AttachMode) (mode AttachMode, nativeErr, err error) {
	if want == 0 || want == ModeNative {
		fd, e := bpfLinkCreateXDP(progFD, ifindex, ModeNative.flags())
		if e == nil {
			*link, *got = fd, ModeNative
			return ModeNative, nil, nil
		}
		nativeErr = e
		if want == ModeNative {
			return 0, nativeErr, fmt.Errorf("afxdp: attach native XDP to ifindex %d: %w", ifindex, e)
		}
	}
	fd, e := bpfLinkCreateXDP(progFD, ifindex, ModeGeneric.flags())
	if e != nil {
		return 0, nativeErr, fmt.Errorf("afxdp: attach generic XDP to ifindex %d: %w (native: %v)", ifindex, e, nativeErr)
	}
	*link, *got = fd, ModeGeneric
	return ModeGeneric, nativeErr, nil
}

// Mode is the mode the program is attached in (0 if not attached).
func (s *Steering) Mode() AttachMode { return s.mode }

// Register puts socket fd in queue's slot of the XSKMAP.
func (s *Steering) Register(queue, fd int) error {
	return bpfMapUpdate(s.xsks, u32le(uint32(queue)), u32le(uint32(fd)))
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
	one := u32le(1)
	var errs []error
	for a := range want {
		if !s.local[a] {
			if err := bpfMapUpdate(s.localMap(a), a.AsSlice(), one); err != nil {
				errs = append(errs, fmt.Errorf("afxdp: add local %s: %w", a, err))
				continue
			}
			s.local[a] = true
		}
	}
	for a := range s.local {
		if !want[a] {
			if err := bpfMapDelete(s.localMap(a), a.AsSlice()); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("afxdp: remove local %s: %w", a, err))
			}
			delete(s.local, a)
		}
	}
	return errors.Join(errs...)
}

func (s *Steering) localMap(a netip.Addr) int {
	if a.Is4() {
		return s.local4
	}
	return s.local6
}

// Close detaches the program (by closing its link) and frees the maps.
func (s *Steering) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, fd := range []*int{&s.link, &s.prog, &s.xsks, &s.local4, &s.local6} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	s.mode = 0
	return nil
}

func u32le(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// steeringProgram emits the program described on Steering.
// Registers: r6 ctx, r7 L3 header, r8 L4 header, r9 data_end.
// With verdictOnly the "to ovfwd" exit returns XDP_TX instead of
// redirecting, so BPF_PROG_TEST_RUN can tell the two outcomes apart.
func steeringProgram(xsks, local4, local6 int, vpnPort uint16, verdictOnly bool) *prog {
	p := &prog{}
	p.Mov(r6, r1)
	p.Load(sizeW, r2, r6, xdpMDData)
	p.Load(sizeW, r9, r6, xdpMDDataEnd)
	// Ethernet header, one optional 802.1Q tag.
	p.Mov(r7, r2)
	p.AddImm(r7, ethHeaderLen)
	p.Jmp(jmpJGT, r7, r9, "ovfwd")
	p.Load(sizeH, r3, r2, 12)
	p.JmpImm(jmpJNE, r3, be16(ethTypeVLAN), "l3")
	p.AddImm(r7, vlanHeaderLen)
	p.Jmp(jmpJGT, r7, r9, "ovfwd")
	p.Load(sizeH, r3, r2, 16)
	p.Label("l3")
	p.JmpImm(jmpJEQ, r3, be16(ethTypeIPv4), "ipv4")
	p.JmpImm(jmpJEQ, r3, be16(ethTypeIPv6), "ipv6")
	p.Ja("ovfwd")

	// IPv4: local destination? Then UDP to the VPN port with P_DATA_V2 is
	// ours, the rest the kernel's. Non-first fragments go to the kernel.
	p.Label("ipv4")
	p.Mov(r2, r7)
	p.AddImm(r2, 20)
	p.Jmp(jmpJGT, r2, r9, "ovfwd")
	p.Load(sizeW, r2, r7, 16)
	p.Store(sizeW, r10, -4, r2)
	p.LoadMapFD(r1, local4)
	p.Mov(r2, r10)
	p.AddImm(r2, -4)
	p.Call(bpfFuncMapLookup)
	p.JmpImm(jmpJEQ, r0, 0, "ovfwd")
	if vpnPort == 0 {
		p.Ja("pass")
	} else {
		p.Load(sizeB, r2, r7, 9)
		p.JmpImm(jmpJNE, r2, ipProtoUDP, "pass")
		p.Load(sizeH, r2, r7, 6)
		p.AndImm(r2, be16(0x1fff))
		p.JmpImm(jmpJNE, r2, 0, "pass")
		p.Load(sizeB, r2, r7, 0)
		p.AndImm(r2, 0x0f)
		p.LshImm(r2, 2)
		p.Mov(r8, r7)
		p.Add(r8, r2)
		p.Ja("udp")
	}

	// IPv6: same, for a UDP header right after the fixed header (extension
	// headers go to the kernel).
	p.Label("ipv6")
	p.Mov(r2, r7)
	p.AddImm(r2, ipv6HeaderLen)
	p.Jmp(jmpJGT, r2, r9, "ovfwd")
	p.Load(sizeDW, r2, r7, 24)
	p.Store(sizeDW, r10, -16, r2)
	p.Load(sizeDW, r2, r7, 32)
	p.Store(sizeDW, r10, -8, r2)
	p.LoadMapFD(r1, local6)
	p.Mov(r2, r10)
	p.AddImm(r2, -16)
	p.Call(bpfFuncMapLookup)
	p.JmpImm(jmpJEQ, r0, 0, "ovfwd")
	p.Load(sizeB, r2, r7, 6)
	p.JmpImm(jmpJEQ, r2, ipProtoICMPv6, "icmp6")
	if vpnPort == 0 {
		p.Ja("pass")
	} else {
		p.JmpImm(jmpJNE, r2, ipProtoUDP, "pass")
		p.Mov(r8, r7)
		p.AddImm(r8, ipv6HeaderLen)

		// UDP to a local address: P_DATA_V2 to the VPN port is ovfwd's.
		p.Label("udp")
		p.Mov(r2, r8)
		p.AddImm(r2, udpHeaderLen+1)
		p.Jmp(jmpJGT, r2, r9, "pass")
		p.Load(sizeH, r2, r8, 2)
		p.JmpImm(jmpJNE, r2, be16(vpnPort), "pass")
		p.Load(sizeB, r2, r8, udpHeaderLen)
		p.RshImm(r2, openvpnOpcodeShift)
		p.JmpImm(jmpJEQ, r2, openvpnPDataV2, "ovfwd")
		p.Ja("pass")
	}

	// Neighbour discovery to a local address (NUD probes, the answers to
	// the kernel's own solicitations) is ovfwd's, like ARP: ovfwd owns the
	// neighbour table and mirrors it into the kernel.
	p.Label("icmp6")
	p.Mov(r2, r7)
	p.AddImm(r2, ipv6HeaderLen+1)
	p.Jmp(jmpJGT, r2, r9, "pass")
	p.Load(sizeB, r2, r7, ipv6HeaderLen)
	p.JmpImm(jmpJEQ, r2, icmp6NeighborSolicit, "ovfwd")
	p.JmpImm(jmpJEQ, r2, icmp6NeighborAdvert, "ovfwd")

	p.Label("pass")
	p.Return(xdpPass)

	// To the queue's socket; XDP_PASS if the queue has none.
	p.Label("ovfwd")
	if verdictOnly {
		p.Return(xdpTX)
		return p
	}
	p.LoadMapFD(r1, xsks)
	p.Load(sizeW, r2, r6, xdpMDRxQueueIndex)
	p.MovImm(r3, xdpPass)
	p.Call(bpfFuncRedirectMap)
	p.Exit()
	return p
}
