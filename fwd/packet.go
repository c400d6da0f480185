package fwd

// Headroom is the space every port reserves in front of received data, so
// that tunnel headers can be pushed in place without moving the payload.
const Headroom = 128

// MaxBatch is the largest batch a worker moves in one call.
const MaxBatch = 256

// Flags describe what is known about a packet. A backend may set the L3/L4
// bits from hardware hints (an mlx5 CQE); the parser sets them otherwise.
type Flags uint16

const (
	FlagVLAN Flags = 1 << iota // one 802.1Q tag (QinQ sets FlagQinQ too)
	FlagQinQ
	FlagIPv4
	FlagIPv6
	FlagUDP
	FlagTCP
	FlagICMP   // ICMPv4 or ICMPv6
	FlagFrag   // an IP fragment (not the first, or more follow)
	FlagL3Only // data starts at the IP header (no Ethernet header), e.g. after tunnel decap
	FlagLocal  // addressed to the appliance itself
	FlagParsed // L3Off/L4Off are valid
	FlagARP    // an ARP packet at L3Off

	// flagPseudoCsum: Parse found the TCP or UDP checksum field equal to
	// the pseudo-header sum, as a sender that left the checksum to its
	// device writes it (partialcsum.go). Only a packet with it set can need
	// finishPartialCsum, as long as its bytes are Parse's.
	flagPseudoCsum
)

// Packet is one packet of a batch: a window onto a buffer owned by a port's
// buffer pool. It is a plain value; batches hold arrays of them that are
// reused for the life of a queue, so no packet is ever allocated.
//
// Buf is the whole buffer: Buf[:Off] is headroom, Buf[Off:Off+Len] the data,
// the rest tailroom. Pool and Handle identify the buffer to its owner.
type Packet struct {
	Buf     []byte
	Handle  uint64 // backend buffer id: a UMEM address, a stride index, a test slot
	Off     uint16
	Len     uint16
	Pool    uint16 // owner of Buf: ports with the same Pool share memory
	InPort  uint16 // ingress port index
	OutPort uint16 // egress port index, set by the pipeline
	Flags   Flags
	VLAN    uint16 // outer VLAN id when FlagVLAN
	L3Off   uint8  // IP header offset from Off when FlagParsed
	L4Off   uint8  // transport header offset from Off when FlagParsed (0: none)
	Verdict Verdict
	Reason  DropReason
	Peer    uint32 // tunnel peer index (set by the FIB for tunnel routes, or by Decap)
}

// Data returns the packet's bytes.
func (p *Packet) Data() []byte { return p.Buf[p.Off : int(p.Off)+int(p.Len)] }

// Push grows the packet by n bytes at the front (into the headroom) and
// returns the new front. The caller guarantees n <= Off.
func (p *Packet) Push(n int) []byte {
	p.Off -= uint16(n)
	p.Len += uint16(n)
	return p.Buf[p.Off : int(p.Off)+n]
}

// Pull drops n bytes from the front. The caller guarantees n <= Len.
func (p *Packet) Pull(n int) {
	p.Off += uint16(n)
	p.Len -= uint16(n)
}

// Verdict is what a stage decided for a packet.
type Verdict uint8

const (
	VerdictForward  Verdict = iota // keep going through the pipeline
	VerdictDrop                    // return the buffer; Reason says why
	VerdictConsumed                // a stage kept or released the buffer itself
)

// Batch is a fixed-capacity list of packets. len(Pkts) is the count; the
// capacity is set once by NewBatch and never grows, so appending within it
// never allocates.
type Batch struct {
	Pkts []Packet
}

// NewBatch makes a batch that holds up to n packets.
func NewBatch(n int) *Batch { return &Batch{Pkts: make([]Packet, 0, n)} }

// Len is the number of packets in the batch.
func (b *Batch) Len() int { return len(b.Pkts) }

// Room is how many more packets fit.
func (b *Batch) Room() int { return cap(b.Pkts) - len(b.Pkts) }

// Reset empties the batch, keeping its storage.
func (b *Batch) Reset() { b.Pkts = b.Pkts[:0] }

// Add appends p; the caller checks Room first.
func (b *Batch) Add(p *Packet) { b.Pkts = append(b.Pkts, *p) }

// ip4Hdr and ip6Hdr view the fixed part of a parsed packet's IP header
// (Parse checked it is there). A view of constant size from a two-index
// slice costs one index check; slicing to the end of the buffer and
// converting costs two and the masking of an empty result, per use.
func ip4Hdr(p *Packet) *[ipv4MinHdrLen]byte {
	x := int(p.Off) + int(p.L3Off)
	return (*[ipv4MinHdrLen]byte)(p.Buf[x : x+ipv4MinHdrLen])
}

func ip6Hdr(p *Packet) *[ipv6HdrLen]byte {
	x := int(p.Off) + int(p.L3Off)
	return (*[ipv6HdrLen]byte)(p.Buf[x : x+ipv6HdrLen])
}
