package dpsim

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// RxStats counts what the model's receive side did.
type RxStats struct {
	Packets, Bytes uint64
	CQEs           uint64 // CQ slots written (titles and mini arrays count once each)
	Fillers        uint64
	CompSessions   uint64
	OutOfBuffer    uint64 // no posted WQE: dropped
	CQFull         uint64 // CQ would overrun: dropped (a real device errors the CQ)
	TooBig         uint64 // above MaxFrame (port MTU) or a whole WQE: dropped
	Faults         uint64 // WQE address unmapped or wrong lkey: dropped
}

type staged struct {
	wqe, stride uint16
	bc          uint32
	hdr, ok     uint8
	csum        uint16
	hash        uint32
	vlan        uint16 // vlan_info of a stripped tag
}

// RxQueue is the device side of one striding RQ and its CQ.
type RxQueue struct {
	mem       *Memory
	rq        []byte
	nWQE      uint32
	strides   uint32
	logStride uint8
	rqDBR     []byte
	cq        []byte
	cqLog     uint8
	cqDBR     []byte
	comp      bool
	enh       bool
	miniFmt   uint8
	hwWQE     uint32 // WQEs started, free running
	used      uint32 // strides used in the current WQE
	active    bool
	wqeAddr   uint64
	pi        uint32
	stage     []staged
	scratch   [prm.CQESize]byte
	single    [1][]byte

	// Flush evicts every written line (no-DDIO DMA).
	Flush bool
	// MaxFrame is the port MTU check (frames above it never reach the RQ).
	MaxFrame int
	// MaxCompressed bounds a compressed session (cqe_compression_max_num).
	MaxCompressed int
	// EndPad is end_padding_mode ALIGN: the device fills the rest of the
	// packet's last cache line (with 0xEE here, so nothing may rely on it).
	EndPad bool
	// Strip is the RQ's VLAN stripping (rqc.vsd = 0): the outer 802.1Q tag
	// is removed from the frame, its TCI goes to vlan_info and
	// l4_l3_hdr_type bit 0 says so. Without it (vsd = 1) tagged frames
	// arrive whole and bit 0 stays clear.
	Strip    bool
	stripBuf [16 << 10]byte
	// PoisonHoles writes slots inside a compressed session that hardware
	// leaves untouched with a CQE that looks valid on the next lap, to
	// catch a driver that skips the owner fix-up (kernel en_rx.c
	// mlx5e_decompress_cqes_cont rewrites the consumed slots' owners).
	PoisonHoles bool

	Stats RxStats
}

func newRxQueue(mem *Memory, cq *dp.CQMem, rq *dp.RQMem) *RxQueue {
	return &RxQueue{
		mem: mem, rq: rq.Ring, nWQE: 1 << rq.LogWQEs, strides: 1 << rq.LogStrides, logStride: rq.LogStrideSize,
		rqDBR: rq.DBRec, cq: cq.Ring, cqLog: cq.LogSize, cqDBR: cq.DBRec, comp: cq.Compressed, enh: cq.Compressed && cq.Enhanced, miniFmt: cq.MiniFormat,
		stage: make([]staged, 0, 2*(1<<cq.LogSize)), MaxFrame: 9216 + 22, MaxCompressed: 64,
	}
}

// NewRxQueue is the device side of a created striding RQ and its CQ over
// mem (for models that create queues through commands, mlx5/model/fullsim).
func NewRxQueue(mem *Memory, cq *dp.CQMem, rq *dp.RQMem) *RxQueue { return newRxQueue(mem, cq, rq) }

// Inject receives one frame.
func (r *RxQueue) Inject(frame []byte) {
	r.single[0] = frame
	r.InjectBatch(r.single[:])
	r.single[0] = nil
}

// InjectBatch receives frames in order. With compression on, runs of
// completions that share everything but length/checksum/stride (same WQE,
// same header types) are written as basic-layout sessions.
func (r *RxQueue) InjectBatch(frames [][]byte) {
	for _, f := range frames {
		r.place(f)
	}
	r.emit()
}

func (r *RxQueue) fetchWQE() bool {
	posted := loadBE32(r.rqDBR[prm.RcvDoorbellOffset:]) & prm.WQECounterMask
	if r.hwWQE&prm.WQECounterMask == posted {
		return false
	}
	w := r.hwWQE & (r.nWQE - 1)
	e := r.rq[w*prm.StridingRQWQEStride : (w+1)*prm.StridingRQWQEStride]
	bc := binary.BigEndian.Uint32(e[prm.RxWQEOffByteCount:])
	if bc != r.strides<<r.logStride || !r.mem.keyValid(binary.BigEndian.Uint32(e[prm.RxWQEOffLKey:])) {
		r.Stats.Faults++
		return false
	}
	r.wqeAddr = binary.BigEndian.Uint64(e[prm.RxWQEOffAddr:])
	r.active, r.used = true, 0
	return true
}

func (r *RxQueue) retire() {
	r.active = false
	r.hwWQE++
}

// cqRoom reports whether n more completions fit the CQ (staged ones count;
// compression only ever saves slots).
func (r *RxQueue) cqRoom(n int) bool {
	ci := loadBE32(r.cqDBR[prm.CQDoorbellSetCI:]) & prm.CQIndexMask
	inUse := (r.pi - ci) & prm.CQIndexMask
	if int(inUse)+len(r.stage)+n > 1<<r.cqLog {
		r.Stats.CQFull++
		return false
	}
	return true
}

func (r *RxQueue) place(f []byte) {
	var tci uint16
	stripped := false
	if r.Strip && len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == 0x8100 && len(f) <= len(r.stripBuf) {
		tci, stripped = binary.BigEndian.Uint16(f[14:]), true
		n := copy(r.stripBuf[:], f[:12])
		n += copy(r.stripBuf[n:], f[16:])
		f = r.stripBuf[:n]
	}
	stride := uint32(1) << r.logStride
	k := (uint32(len(f)) + stride - 1) / stride
	if len(f) > r.MaxFrame || k > r.strides || len(f) == 0 {
		r.Stats.TooBig++
		return
	}
	for {
		if !r.active && !r.fetchWQE() {
			r.Stats.OutOfBuffer++
			return
		}
		if r.used+k <= r.strides {
			break
		}
		if !r.cqRoom(2) {
			return
		}
		// The packet does not fit the rest of this WQE: a filler CQE
		// closes it and the packet goes to the next one.
		r.stage = append(r.stage, staged{wqe: uint16(r.hwWQE & (r.nWQE - 1)), stride: uint16(r.used),
			bc: prm.MPWRQFillerFlag | (r.strides-r.used)<<prm.MPWRQConsumedShift})
		r.Stats.Fillers++
		r.retire()
	}
	if !r.cqRoom(1) {
		return
	}
	hdr, ok := classify(f)
	if stripped {
		hdr |= prm.CQEVLANStripped
	}
	// Flush the packet's lines and the (shinfo) line after it.
	at := r.wqeAddr + uint64(r.used)<<r.logStride
	if pad := -len(f) & 63; r.EndPad && pad > 0 {
		// Before the packet: its write flushes this line with the rest.
		r.mem.write(at+uint64(len(f)), endPadBytes[:pad], false, 0)
	}
	if !r.mem.write(at, f, r.Flush, 64) {
		r.Stats.Faults++
		return
	}
	r.stage = append(r.stage, staged{wqe: uint16(r.hwWQE & (r.nWQE - 1)), stride: uint16(r.used),
		bc: k<<prm.MPWRQConsumedShift | uint32(len(f)), hdr: hdr, ok: ok, hash: flowHash(f), vlan: tci})
	r.used += k
	r.Stats.Packets++
	r.Stats.Bytes += uint64(len(f))
	if r.used == r.strides {
		r.retire()
	}
}

// emit writes the staged completions.
func (r *RxQueue) emit() {
	s := r.stage
	for i := 0; i < len(s); {
		n := 1
		if r.comp && s[i].bc&prm.MPWRQFillerFlag == 0 {
			for i+n < len(s) && n < r.MaxCompressed && compressible(&s[i], &s[i+n]) {
				n++
			}
		}
		if n >= 2 && r.enh {
			r.writeCQE(&s[i]) // the title
			for k := i + 1; k < i+n; k += maxBlockMinis {
				r.writeBlock(s[k:min(k+maxBlockMinis, i+n)])
			}
		} else if n >= 2 {
			r.writeSession(s[i : i+n])
		} else {
			r.writeCQE(&s[i])
		}
		i += n
	}
	r.stage = r.stage[:0]
}

var endPadBytes = func() (b [64]byte) {
	for i := range b {
		b[i] = 0xEE
	}
	return
}()

func compressible(a, b *staged) bool {
	return b.bc&prm.MPWRQFillerFlag == 0 && a.wqe == b.wqe && a.hdr == b.hdr && a.ok == b.ok && a.vlan == b.vlan
}

func (r *RxQueue) slot(i uint32) []byte {
	o := (i & (1<<r.cqLog - 1)) * prm.CQESize
	return r.cq[o : o+prm.CQESize : o+prm.CQESize]
}

func (r *RxQueue) fill(c []byte, e *staged) {
	clear(c)
	binary.BigEndian.PutUint16(c[prm.CQEOffWQEID:], e.wqe)
	binary.BigEndian.PutUint32(c[prm.CQEOffRSSHashResult:], e.hash)
	if e.hash != 0 {
		c[prm.CQEOffRSSHashType] = 1<<2 | 2<<6
	}
	binary.BigEndian.PutUint16(c[prm.CQEOffCheckSum:], e.csum)
	c[prm.CQEOffHdsIPExt] = e.ok
	c[prm.CQEOffL4L3HdrType] = e.hdr
	binary.BigEndian.PutUint32(c[prm.CQEOffByteCnt:], e.bc)
	binary.BigEndian.PutUint16(c[prm.CQEOffWQECounter:], e.stride)
	binary.BigEndian.PutUint16(c[prm.CQEOffVLANInfo:], e.vlan)
}

// publish copies bytes 0..62 of the scratch CQE into slot p, then the owner
// byte last (the driver reads op_own first), then flushes the line.
func (r *RxQueue) publish(p uint32, opOwn uint8) {
	c := r.slot(p)
	copy(c[:prm.CQEOffWQECounter], r.scratch[:prm.CQEOffWQECounter])
	publishOwnerWord(c, r.scratch[prm.CQEOffWQECounter], r.scratch[prm.CQEOffWQECounter+1], uint8(p>>r.cqLog), opOwn)
	if r.Flush {
		flushBytes(c)
	}
}

func (r *RxQueue) owner(p uint32) uint8 { return uint8(p>>r.cqLog) & 1 }

func (r *RxQueue) writeCQE(e *staged) {
	r.fill(r.scratch[:], e)
	r.publish(r.pi, prm.CQEOpRespSend<<prm.CQEOpcodeShift|r.owner(r.pi))
	r.pi++
	r.Stats.CQEs++
}

// writeSession writes a basic-layout compressed session: mini-CQE arrays at
// c+1, c+8, c+16 …, then the title at c with byte_cnt = N and format 3.
func (r *RxQueue) writeSession(s []staged) {
	c := r.pi
	n := uint32(len(s))
	for i := uint32(0); i < n; i += prm.MiniCQEArraySize {
		at := c + 1
		if i > 0 {
			at = c + i
		}
		arr := r.slot(at)
		for j := uint32(0); j < prm.MiniCQEArraySize; j++ {
			m := arr[j*prm.MiniCQESize : (j+1)*prm.MiniCQESize]
			if i+j >= n {
				clear(m)
				continue
			}
			e := &s[i+j]
			if r.miniFmt == prm.MiniCQEHash {
				binary.BigEndian.PutUint32(m[0:], e.hash)
			} else {
				binary.BigEndian.PutUint16(m[prm.MiniOffCheckSum:], e.csum)
				stride := e.stride
				if r.miniFmt != prm.MiniCQECsumStridx {
					stride = 0
				}
				binary.BigEndian.PutUint16(m[prm.MiniOffStrideIdx:], stride)
			}
			binary.BigEndian.PutUint32(m[prm.MiniOffByteCnt:], e.bc)
		}
		if r.Flush {
			flushBytes(arr)
		}
		r.Stats.CQEs++
	}
	if r.PoisonHoles {
		for k := uint32(2); k < n; k++ {
			if k%prm.MiniCQEArraySize == 0 {
				continue
			}
			h := r.slot(c + k)
			next := r.owner(c+k) ^ 1
			h[prm.CQEOffOpOwn] = prm.CQEOpRespSend<<prm.CQEOpcodeShift | next
		}
	}
	t := s[0]
	t.bc = n
	r.fill(r.scratch[:], &t)
	r.publish(c, prm.CQEOpRespSend<<prm.CQEOpcodeShift|prm.CQEFormatComp<<prm.CQEFormatShift|r.owner(c))
	r.pi = c + n
	r.Stats.CQEs++
	r.Stats.CompSessions++
}

// classify computes the CQE's l4_l3_hdr_type and hds_ip_ext bytes from the
// frame: IPv4 (header checksum verified) or IPv6 behind at most one 802.1Q
// tag, UDP or TCP, options, fragments. Bit 0 (VLAN stripped) is the
// caller's: it is set only when the tag was taken out of the frame. L4
// checksums are not verified by the model (L4_OK is not set).
func classify(f []byte) (hdr, ok uint8) {
	if len(f) < 14 {
		return 0, 0
	}
	ok = prm.CQEL2OK
	et := binary.BigEndian.Uint16(f[12:])
	l3 := 14
	if et == 0x8100 && len(f) >= 18 {
		et = binary.BigEndian.Uint16(f[16:])
		l3 = 18
	}
	var proto uint8
	switch {
	case et == 0x0800 && len(f) >= l3+20 && f[l3]>>4 == 4:
		hdr |= prm.CQEL3HdrIPv4 << prm.CQEL3HdrShift
		ihl := int(f[l3]&15) * 4
		if ihl > 20 {
			hdr |= prm.CQEIPExtOpts
		}
		if ihl >= 20 && len(f) >= l3+ihl && ipv4Sum(f[l3:l3+ihl]) == 0xFFFF {
			ok |= prm.CQEL3OK
		}
		if binary.BigEndian.Uint16(f[l3+6:])&0x3FFF != 0 {
			hdr |= prm.CQEIPFrag
		}
		proto = f[l3+9]
	case et == 0x86DD && len(f) >= l3+40 && f[l3]>>4 == 6:
		hdr |= prm.CQEL3HdrIPv6 << prm.CQEL3HdrShift
		proto = f[l3+6]
		if proto != 6 && proto != 17 {
			hdr |= prm.CQEIPExtOpts
		}
	default:
		return hdr, ok
	}
	switch proto {
	case 17:
		hdr |= prm.CQEL4HdrUDP << prm.CQEL4HdrShift
	case 6:
		hdr |= prm.CQEL4HdrTCP << prm.CQEL4HdrShift
	}
	return hdr, ok
}

func ipv4Sum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xFFFF {
		s = s&0xFFFF + s>>16
	}
	return uint16(s)
}

// flowHash stands in for the RSS hash: deterministic over the address bytes.
func flowHash(f []byte) uint32 {
	if len(f) < 34 {
		return 0
	}
	h := uint32(2166136261)
	for _, b := range f[26:34] {
		h = (h ^ uint32(b)) * 16777619
	}
	return h
}

// maxBlockMinis: bytes 56..63 of an enhanced block stay a header (the
// kernel's mlx5e_decompress_enhanced_cqe reads at most 7 minis; docs/mlx5.md section 4).
const maxBlockMinis = 7

// writeBlock writes an enhanced-layout block of len(s) mini-CQEs at the
// producer index: minis at bytes 8i, vic in byte 62, op_own = (count−1) << 4
// | format 3 | owner. It consumes count CQ indices.
func (r *RxQueue) writeBlock(s []staged) {
	clear(r.scratch[:])
	for j := range s {
		m := r.scratch[j*prm.MiniCQESize : (j+1)*prm.MiniCQESize]
		e := &s[j]
		if r.miniFmt == prm.MiniCQEHash {
			binary.BigEndian.PutUint32(m[0:], e.hash)
		} else {
			binary.BigEndian.PutUint16(m[prm.MiniOffCheckSum:], e.csum)
			if r.miniFmt == prm.MiniCQECsumStridx {
				binary.BigEndian.PutUint16(m[prm.MiniOffStrideIdx:], e.stride)
			}
		}
		binary.BigEndian.PutUint32(m[prm.MiniOffByteCnt:], e.bc)
	}
	n := uint32(len(s))
	r.publish(r.pi, uint8(n-1)<<prm.CQEOpcodeShift|prm.CQEFormatComp<<prm.CQEFormatShift|r.owner(r.pi))
	r.pi += n
	r.Stats.CQEs++
	r.Stats.CompSessions++
}
