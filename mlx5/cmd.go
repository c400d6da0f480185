package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// CmdError is a command the firmware (or its transport) refused.
type CmdError struct {
	Opcode   uint16
	OpMod    uint16
	Delivery uint8  // transport status; non-zero means the command never ran
	Status   uint8  // mbox_out.status
	Syndrome uint32 // firmware-specific; log it
}

func (e *CmdError) Error() string {
	if e.Delivery != prm.DeliveryOK {
		return fmt.Sprintf("mlx5: %s (op_mod %d): not delivered: %s", prm.OpcodeName(e.Opcode), e.OpMod, prm.DeliveryName(e.Delivery))
	}
	return fmt.Sprintf("mlx5: %s (op_mod %d) failed: %s (status 0x%x, syndrome 0x%x)",
		prm.OpcodeName(e.Opcode), e.OpMod, prm.StatusName(e.Status), e.Status, e.Syndrome)
}

// ErrTimeout is wrapped by every command timeout.
var ErrTimeout = errors.New("timed out")

// TimeoutError is a command whose ownership bit never returned to software.
type TimeoutError struct {
	Opcode uint16
	After  time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("mlx5: %s: no completion after %v (ownership bit still set)", prm.OpcodeName(e.Opcode), e.After)
}

func (e *TimeoutError) Unwrap() error { return ErrTimeout }

// mailbox chains are preallocated per slot: chainBlocks blocks each way
// carry messages up to 16 + chainBlocks × 512 bytes (8 KiB), enough for
// SET_HCA_CAP (4112) and MANAGE_PAGES of maxPagesPerCommand pages.
const (
	chainBlocks        = 16
	maxMessage         = prm.CmdInlineBytes + chainBlocks*prm.MailboxDataSize
	maxPagesPerCommand = (maxMessage - 16) / 8
)

type chain struct {
	mem  []byte
	iova uint64
}

type slot struct {
	in, out chain
}

// cmdq is the command interface (kernel cmd.c; struct mlx5_cmd_layout and
// mlx5_cmd_prot_block in include/linux/mlx5/device.h).
type cmdq struct {
	bus       Bus
	opt       *Options
	page      []byte
	pageIOVA  uint64
	logStride uint8
	slots     []slot // cur: ordinary commands (0 until one is lost), last slot page supply
	cur       int
	pageSlot  int
	token     uint8
	busy      []bool
	lost      []bool // slots a failed wait left owned by the device
	// onWait is called while a command is outstanding, to service page
	// requests (set once the async EQ exists).
	onWait func() error
	health func() error
	// eventErr is an event-servicing failure met while a command waited
	// that then completed; Service reports it.
	eventErr error
}

func newCmdq(bus Bus, opt *Options, logSz, logStride uint8) (*cmdq, error) {
	if 1<<logSz > prm.MaxCommands || logSz+logStride > 12 || logStride < 6 {
		return nil, fmt.Errorf("mlx5: unsupported command queue geometry: 2^%d entries of 2^%d bytes", logSz, logStride)
	}
	page, iova, err := bus.DMA.Alloc(4096, 4096)
	if err != nil {
		return nil, fmt.Errorf("mlx5: command queue page: %w", err)
	}
	c := &cmdq{bus: bus, opt: opt, page: page, pageIOVA: iova, logStride: logStride}
	n := 1 << logSz
	c.pageSlot = n - 1
	c.slots = make([]slot, n)
	c.busy = make([]bool, n)
	c.lost = make([]bool, n)
	for _, i := range []int{0, c.pageSlot} {
		for _, ch := range []*chain{&c.slots[i].in, &c.slots[i].out} {
			ch.mem, ch.iova, err = bus.DMA.Alloc(chainBlocks*prm.MailboxAlign, prm.MailboxAlign)
			if err != nil {
				c.free()
				return nil, fmt.Errorf("mlx5: mailboxes: %w", err)
			}
		}
	}
	return c, nil
}

func (c *cmdq) free() {
	lost := false
	for i, s := range c.slots {
		if c.lost[i] {
			// The device may still write this slot's output: leak its
			// mailboxes and the queue page rather than free live DMA.
			lost = true
			continue
		}
		for _, ch := range []chain{s.in, s.out} {
			if ch.mem != nil {
				c.bus.DMA.Free(ch.iova)
			}
		}
	}
	if c.page != nil && !lost {
		c.bus.DMA.Free(c.pageIOVA)
		c.page = nil
	}
}

// prepareChain links the blocks needed for n message bytes and stamps
// block numbers and the token (the firmware checks both).
func prepareChain(ch *chain, n int, token uint8, zero bool) {
	blocks := (n - prm.CmdInlineBytes + prm.MailboxDataSize - 1) / prm.MailboxDataSize
	for i := 0; i < blocks; i++ {
		b := ch.mem[i*prm.MailboxAlign : i*prm.MailboxAlign+prm.MailboxSize]
		if zero {
			clear(b)
		} else {
			clear(b[prm.MailboxDataSize:])
		}
		next := uint64(0)
		if i+1 < blocks {
			next = ch.iova + uint64(i+1)*prm.MailboxAlign
		}
		binary.BigEndian.PutUint64(b[prm.MailboxNext:], next)
		binary.BigEndian.PutUint32(b[prm.MailboxBlockNum:], uint32(i))
		b[prm.MailboxToken] = token
	}
}

// exec runs one command: in is the whole input message (header first),
// outLen the expected output length. It returns the output message after
// checking delivery and command status.
func (c *cmdq) exec(in []byte, outLen int) ([]byte, error) {
	return c.execSlot(ordinarySlot, in, outLen)
}

// ordinarySlot asks execSlot for the slot of ordinary commands.
const ordinarySlot = -1

// nextSlot moves ordinary commands off a slot the device kept (a command
// that timed out) to the next unused one, with mailboxes of its own.
func (c *cmdq) nextSlot() error {
	for i := c.cur + 1; i < c.pageSlot; i++ {
		if c.lost[i] {
			continue
		}
		for _, ch := range []*chain{&c.slots[i].in, &c.slots[i].out} {
			if ch.mem != nil {
				continue
			}
			var err error
			if ch.mem, ch.iova, err = c.bus.DMA.Alloc(chainBlocks*prm.MailboxAlign, prm.MailboxAlign); err != nil {
				ch.mem = nil
				return fmt.Errorf("mlx5: mailboxes for command slot %d: %w", i, err)
			}
		}
		c.cur = i
		return nil
	}
	return errors.New("mlx5: every command slot is held by a command the device never completed; reset the function")
}

func (c *cmdq) execSlot(idx int, in []byte, outLen int) ([]byte, error) {
	if idx == ordinarySlot {
		if c.lost[c.cur] {
			if err := c.nextSlot(); err != nil {
				return nil, err
			}
		}
		idx = c.cur
	}
	op := uint16(prm.InOpcode.Get(in))
	opMod := uint16(prm.InOpMod.Get(in))
	if len(in) > maxMessage || outLen > maxMessage || outLen < prm.CmdOutMinLen || len(in) < prm.CmdHeaderLen {
		return nil, fmt.Errorf("mlx5: %s: message of %d/%d bytes does not fit the mailboxes", prm.OpcodeName(op), len(in), outLen)
	}
	if c.busy[idx] {
		return nil, fmt.Errorf("mlx5: %s: command slot %d busy (recursive page request?)", prm.OpcodeName(op), idx)
	}
	if c.lost[idx] {
		return nil, fmt.Errorf("mlx5: %s: command slot %d is still owned by the device from a command that never completed; reset the function", prm.OpcodeName(op), idx)
	}
	c.busy[idx] = true
	defer func() { c.busy[idx] = false }()

	s := &c.slots[idx]
	c.token++
	if c.token == 0 {
		c.token = 1
	}
	e := c.page[idx<<c.logStride : idx<<c.logStride+prm.CmdEntrySize]
	clear(e)
	e[prm.CmdEntryType] = prm.CmdTypePCI
	binary.BigEndian.PutUint32(e[prm.CmdEntryInLen:], uint32(len(in)))
	binary.BigEndian.PutUint32(e[prm.CmdEntryOutLen:], uint32(outLen))
	copy(e[prm.CmdEntryIn:prm.CmdEntryIn+prm.CmdInlineBytes], in)
	if len(in) > prm.CmdInlineBytes {
		prepareChain(&s.in, len(in), c.token, false)
		rest := in[prm.CmdInlineBytes:]
		for i := 0; len(rest) > 0; i++ {
			rest = rest[copy(s.in.mem[i*prm.MailboxAlign:i*prm.MailboxAlign+prm.MailboxDataSize], rest):]
		}
		binary.BigEndian.PutUint64(e[prm.CmdEntryInPtr:], s.in.iova)
	}
	if outLen > prm.CmdInlineBytes {
		prepareChain(&s.out, outLen, c.token, true)
		binary.BigEndian.PutUint64(e[prm.CmdEntryOutPtr:], s.out.iova)
	}
	e[prm.CmdEntryToken] = c.token
	// The kernel always signs the entry (XOR of all 64 bytes, with
	// status_own = 1, is 0xFF), even with checksums disabled; whether
	// firmware checks it before SET_HCA_CAP is unknown (docs/mlx5.md section 4), so
	// sign too. Mailbox blocks are left unsigned: checksums are disabled.
	e[prm.CmdEntrySig] = ^(xor8(e) ^ prm.CmdOwnerHW)
	// Ownership goes to hardware last; the atomic store keeps the compiler
	// from sinking the entry and mailbox writes below it, and x86 stores
	// are ordered (kernel cmd.c: wmb() before the ownership write).
	storeByte(&e[prm.CmdEntryStatusOwn], prm.CmdOwnerHW)
	c.bus.MMIO.Write32(prm.InitCmdDoorbell, 1<<idx)

	if err := c.wait(e, op, idx); err != nil {
		if loadByte(&e[prm.CmdEntryStatusOwn])&prm.CmdOwnerHW != 0 {
			// The device may still read this entry and write its
			// output: never hand the slot (or its mailboxes) out again.
			c.lost[idx] = true
		}
		return nil, err
	}
	return decodeOutput(op, opMod, e, s.out.mem, outLen)
}

// decodeOutput turns a completed entry and its output mailbox chain (blocks
// at MailboxAlign strides in chain) into the output message, checking the
// delivery status, the chain's block numbers and the command status. The
// bytes come from the device, so nothing in them is trusted.
func decodeOutput(op, opMod uint16, e, chain []byte, outLen int) ([]byte, error) {
	if len(e) < prm.CmdEntrySize || outLen < prm.CmdOutMinLen {
		return nil, fmt.Errorf("mlx5: %s: malformed completion", prm.OpcodeName(op))
	}
	if d := e[prm.CmdEntryStatusOwn] >> prm.CmdDeliveryShift; d != prm.DeliveryOK {
		return nil, &CmdError{Opcode: op, OpMod: opMod, Delivery: d}
	}
	out := make([]byte, outLen)
	n := copy(out, e[prm.CmdEntryOut:prm.CmdEntryOut+prm.CmdInlineBytes])
	for i := 0; n < outLen; i++ {
		b := i * prm.MailboxAlign
		if b+prm.MailboxSize > len(chain) {
			return nil, fmt.Errorf("mlx5: %s: output of %d bytes exceeds the mailbox chain", prm.OpcodeName(op), outLen)
		}
		if binary.BigEndian.Uint32(chain[b+prm.MailboxBlockNum:]) != uint32(i) {
			return nil, fmt.Errorf("mlx5: %s: output mailbox %d carries block number %d", prm.OpcodeName(op), i,
				binary.BigEndian.Uint32(chain[b+prm.MailboxBlockNum:]))
		}
		n += copy(out[n:], chain[b:b+prm.MailboxDataSize])
	}
	if err := checkStatus(op, opMod, out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkStatus decodes mbox_out status and syndrome.
func checkStatus(op, opMod uint16, out []byte) error {
	if len(out) < prm.CmdOutMinLen {
		return fmt.Errorf("mlx5: %s: output of %d bytes is shorter than its header", prm.OpcodeName(op), len(out))
	}
	if st := uint8(prm.OutStatus.Get(out)); st != prm.StatusOK {
		return &CmdError{Opcode: op, OpMod: opMod, Status: st, Syndrome: uint32(prm.OutSynd.Get(out))}
	}
	return nil
}

// wait polls the ownership bit. While waiting it services the async EQ:
// the firmware may hold a command until the pages it asked for arrive
// (kernel cmd.c runs page requests from their own work queue for the same
// reason). A failure while servicing events does not end the wait — the
// entry is still the device's — it is reported with the command's outcome.
func (c *cmdq) wait(e []byte, op uint16, idx int) error {
	var waited time.Duration
	var evErr error
	for polls := 0; ; polls++ {
		if loadByte(&e[prm.CmdEntryStatusOwn])&prm.CmdOwnerHW == 0 {
			if evErr != nil && c.eventErr == nil {
				// The command's own outcome stands (its object may
				// exist); the event failure surfaces at the next Service.
				c.eventErr = fmt.Errorf("while %s waited: %w", prm.OpcodeName(op), evErr)
			}
			return nil
		}
		if c.onWait != nil && idx != c.pageSlot {
			if err := c.onWait(); err != nil && evErr == nil {
				evErr = err
			}
			if loadByte(&e[prm.CmdEntryStatusOwn])&prm.CmdOwnerHW == 0 {
				continue
			}
		}
		if c.health != nil && polls%16 == 15 {
			if err := c.health(); err != nil {
				return fmt.Errorf("mlx5: %s: %w", prm.OpcodeName(op), err)
			}
		}
		if waited >= c.opt.CommandTimeout {
			if c.health != nil {
				if err := c.health(); err != nil {
					return fmt.Errorf("mlx5: %s: %w", prm.OpcodeName(op), err)
				}
			}
			if evErr != nil {
				return errors.Join(&TimeoutError{Opcode: op, After: waited}, fmt.Errorf("servicing events while waiting: %w", evErr))
			}
			return &TimeoutError{Opcode: op, After: waited}
		}
		c.opt.Sleep(c.opt.PollInterval)
		waited += c.opt.PollInterval
	}
}

// storeByte/loadByte access a DMA byte with atomic (ordered, never split or
// elided) semantics by going through its aligned 32-bit word. Invariant: b
// lies in a DMA buffer whose start is 4-byte aligned (page-aligned here),
// so the word containing b is in the same buffer.
func storeByte(b *byte, v byte) {
	w, shift := word(b)
	for {
		old := atomic.LoadUint32(w)
		nw := old&^(0xFF<<shift) | uint32(v)<<shift
		if atomic.CompareAndSwapUint32(w, old, nw) {
			return
		}
	}
}

func loadByte(b *byte) byte {
	w, shift := word(b)
	return byte(atomic.LoadUint32(w) >> shift)
}

func xor8(b []byte) byte {
	var x byte
	for _, v := range b {
		x ^= v
	}
	return x
}
