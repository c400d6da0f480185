package sim

import (
	"encoding/binary"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// pendingCmd is a command held back by a page request (Faults.PageRequestOpcode).
type pendingCmd struct {
	slot      int
	entry     []byte
	in        []byte
	outBlocks [][]byte
	outLen    int
}

// runSlot processes one doorbelled command slot, checking what the kernel's
// cmd.c builds (struct mlx5_cmd_layout, mailbox chains). Called with d.mu held.
func (d *Device) runSlot(slot int) {
	if d.pciCommand&prm.PCICommandBusMaster == 0 || !d.cmdqSet {
		// Without bus mastering (or a queue address) the device cannot
		// even read the entry: nothing happens, the driver times out.
		d.stats.DoorbellsIgnored++
		return
	}
	if d.syndrome() != 0 {
		return // crashed firmware completes nothing
	}
	if d.inflight[slot] {
		// The driver rang a slot whose command the device still owns:
		// the entry it just rewrote is live. Firmware behaviour is
		// undefined; the model records it and ignores the doorbell.
		d.violations.SlotReused++
		return
	}
	if d.initReads > 0 || d.faults.InitTimeout {
		// Still initializing: a driver that did not wait for the
		// initializing bit after setting the queue address gets nothing.
		d.stats.DoorbellsIgnored++
		return
	}
	base := uint64(d.cmdqH)<<32 | uint64(d.cmdqL&^0xFFF)
	e, err := d.mem.Slice(base+uint64(slot)<<d.cfg.LogCmdqStride, prm.CmdEntrySize)
	if err != nil {
		return
	}
	if e[prm.CmdEntryStatusOwn]&prm.CmdOwnerHW == 0 {
		d.stats.DoorbellsIgnored++
		return
	}
	in, outBlocks, outLen, delivery := d.gather(e)
	if delivery != prm.DeliveryOK {
		d.stats.DeliveryErrors++
		d.complete(slot, e, nil, nil, delivery)
		return
	}
	op := uint16(prm.InOpcode.Get(in))
	if d.faults.StuckOpcode != 0 && op == d.faults.StuckOpcode {
		d.inflight[slot] = true
		return
	}
	if d.faults.PageRequestOpcode != 0 && op == d.faults.PageRequestOpcode && d.pending == nil {
		if eq := d.pageRequestEQ(); eq != nil {
			n := d.faults.PageRequestPages
			d.runtimeOwed += n
			d.pending = &pendingCmd{slot: slot, entry: e, in: in, outBlocks: outBlocks, outLen: outLen}
			d.inflight[slot] = true
			d.postPageRequest(eq, int32(n))
			d.faults.PageRequestOpcode = 0 // once
			return
		}
	}
	out := d.execute(in, outLen)
	d.complete(slot, e, out, outBlocks, prm.DeliveryOK)
	if d.pending != nil && d.runtimeOwed <= 0 {
		p := d.pending
		d.pending = nil
		d.inflight[p.slot] = false
		out := d.execute(p.in, p.outLen)
		d.complete(p.slot, p.entry, out, p.outBlocks, prm.DeliveryOK)
	}
}

// gather reads the input message and locates the output blocks, checking
// the entry and every mailbox block like the firmware's transport does.
func (d *Device) gather(e []byte) (in []byte, outBlocks [][]byte, outLen int, delivery uint8) {
	if e[prm.CmdEntryType] != prm.CmdTypePCI {
		return nil, nil, 0, prm.DeliveryBadCmdDesc
	}
	if d.cfg.CheckEntrySignature {
		var x byte
		for _, b := range e {
			x ^= b
		}
		if x != 0xFF {
			return nil, nil, 0, prm.DeliverySignatureErr
		}
	}
	inLen := int(be32(e[prm.CmdEntryInLen:]))
	outLen = int(be32(e[prm.CmdEntryOutLen:]))
	if inLen < prm.CmdHeaderLen || inLen > 1<<20 {
		return nil, nil, 0, prm.DeliveryBadInLen
	}
	if outLen < prm.CmdOutMinLen || outLen > 1<<20 {
		return nil, nil, 0, prm.DeliveryBadOutLen
	}
	token := e[prm.CmdEntryToken]
	in = make([]byte, inLen)
	copy(in, e[prm.CmdEntryIn:prm.CmdEntryIn+prm.CmdInlineBytes])
	blocks, st := d.walk(binary.BigEndian.Uint64(e[prm.CmdEntryInPtr:]), inLen, token, prm.DeliveryBadInPtr)
	if st != prm.DeliveryOK {
		return nil, nil, 0, st
	}
	rest := in[prm.CmdInlineBytes:]
	for _, b := range blocks {
		rest = rest[copy(rest, b[:prm.MailboxDataSize]):]
	}
	outBlocks, st = d.walk(binary.BigEndian.Uint64(e[prm.CmdEntryOutPtr:]), outLen, token, prm.DeliveryBadOutPtr)
	if st != prm.DeliveryOK {
		return nil, nil, 0, st
	}
	return in, outBlocks, outLen, prm.DeliveryOK
}

// walk follows a mailbox chain long enough for a message of n bytes.
// Blocks must be 1 KiB aligned [INFERRED: the kernel's pool alignment;
// rdma-core uses 4 KiB], numbered 0,1,2… and carry the entry's token.
func (d *Device) walk(ptr uint64, n int, token uint8, badPtr uint8) ([][]byte, uint8) {
	need := (n - prm.CmdInlineBytes + prm.MailboxDataSize - 1) / prm.MailboxDataSize
	var blocks [][]byte
	for i := 0; i < need; i++ {
		if ptr == 0 || ptr%prm.MailboxAlign != 0 {
			return nil, badPtr
		}
		b, err := d.mem.Slice(ptr, prm.MailboxSize)
		if err != nil {
			return nil, badPtr
		}
		if be32(b[prm.MailboxBlockNum:]) != uint32(i) {
			return nil, prm.DeliveryBadBlockNumber
		}
		if b[prm.MailboxToken] != token {
			return nil, prm.DeliveryTokenErr
		}
		blocks = append(blocks, b)
		ptr = binary.BigEndian.Uint64(b[prm.MailboxNext:])
	}
	return blocks, prm.DeliveryOK
}

// complete scatters the output and hands the slot back to software, the
// ownership byte last (the order kernel cmd.c relies on when it polls it).
func (d *Device) complete(slot int, e, out []byte, outBlocks [][]byte, delivery uint8) {
	if delivery == prm.DeliveryOK {
		n := copy(e[prm.CmdEntryOut:prm.CmdEntryOut+prm.CmdInlineBytes], out)
		rest := out[n:]
		for _, b := range outBlocks {
			rest = rest[copy(b[:prm.MailboxDataSize], rest):]
		}
	}
	e[prm.CmdEntryStatusOwn] = delivery << prm.CmdDeliveryShift
	for _, eq := range d.eqs {
		if eq.subscribed(prm.EventCmd) {
			var data [4]byte
			binary.BigEndian.PutUint32(data[:], 1<<slot)
			d.postEQE(eq, prm.EventCmd, 0, data[:])
			break
		}
	}
}
