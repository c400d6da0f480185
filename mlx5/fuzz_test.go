package mlx5

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// FuzzDecodeOutput feeds arbitrary completions (entry bytes, output
// mailboxes, expected length) to the command-output parser and to the
// parsers of the outputs the driver reads. None may panic; a decoded
// output must have the requested length and an OK status.
func FuzzDecodeOutput(f *testing.F) {
	good := make([]byte, 64+2*prm.MailboxAlign)
	binary.BigEndian.PutUint32(good[64+prm.MailboxBlockNum:], 0)
	binary.BigEndian.PutUint32(good[64+prm.MailboxAlign+prm.MailboxBlockNum:], 1)
	f.Add(good, uint16(600))
	f.Add(good, uint16(16))
	bad := append([]byte(nil), good...)
	bad[prm.CmdEntryStatusOwn] = prm.DeliveryBadBlockNumber << 1
	f.Add(bad, uint16(100))
	failed := append([]byte(nil), good...)
	failed[prm.CmdEntryOut] = prm.StatusBadParam
	f.Add(failed, uint16(16))
	f.Add([]byte{1, 2, 3}, uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, outLen uint16) {
		if len(data) < 64 {
			return
		}
		e, chain := data[:64], data[64:]
		out, err := decodeOutput(prm.OpQueryHCACap, 0, e, chain, int(outLen))
		if err != nil {
			return
		}
		if len(out) != int(outLen) || prm.OutStatus.Get(out) != 0 {
			t.Fatalf("decoded %d bytes with status %d, want %d bytes OK", len(out), prm.OutStatus.Get(out), outLen)
		}
		// Output parsers the driver applies to such messages.
		if len(out) >= prm.QueryHCACapOutLen {
			c := out[prm.CapabilityOffset:]
			_ = parseCaps(c, c, c)
		}
		if len(out) >= prm.QueryNICVportOutLen {
			_ = prm.QVportMTU.Get(out) + prm.QVportMAC31_0.Get(out)
		}
		if len(out) >= 16 {
			_ = prm.ManagePagesOutNum.Get(out)
		}
	})
}

// FuzzParseCaps feeds arbitrary general, Ethernet and flow-table capability
// blocks (as QUERY_HCA_CAP returns them, always CapabilitySize bytes) to
// parseCaps. None may panic, and what it derives must stay inside what the
// PRM allows, whatever the device reports: striding-RQ ranges only with
// the cap and inside 3..16 strides and 64 B..8 KiB strides, a resolved TX
// inline mode of none or L2 (none only when the device says it needs none),
// and a NIC flow table only when both the general and the flow-table caps
// offer it.
func FuzzParseCaps(f *testing.F) {
	zero := make([]byte, prm.CapabilitySize)
	ones := bytes.Repeat([]byte{0xFF}, prm.CapabilitySize)
	f.Add(zero, zero, zero)
	f.Add(ones, ones, ones)
	f.Add(ones, zero, ones)
	f.Fuzz(func(t *testing.T, gen, eth, ft []byte) {
		block := func(b []byte) []byte {
			c := make([]byte, prm.CapabilitySize)
			copy(c, b)
			return c
		}
		gen, eth, ft = block(gen), block(eth), block(ft)
		c := parseCaps(gen, eth, ft)
		if c.StridingRQ != (prm.CapStridingRQ.Get(gen) == 1) {
			t.Fatalf("StridingRQ %v, cap bit %d", c.StridingRQ, prm.CapStridingRQ.Get(gen))
		}
		if c.StridingRQ {
			if c.MinLogStrides < 3 || c.MinLogStrides > c.MaxLogStrides || c.MaxLogStrides > 16 ||
				c.MinLogStrideSize < 6 || c.MinLogStrideSize > c.MaxLogStrideSz || c.MaxLogStrideSz > 13 {
				t.Fatalf("striding ranges out of the PRM's: %+v", c)
			}
		} else if c.MaxLogStrides != 0 || c.MaxLogStrideSz != 0 {
			t.Fatalf("striding ranges without the cap: %+v", c)
		}
		switch {
		case c.MinInline != prm.InlineNone && c.MinInline != prm.InlineL2:
			t.Fatalf("inline mode %d", c.MinInline)
		case c.MinInline == prm.InlineNone && c.WQEInlineMode != prm.CapInlineNotNeeded:
			t.Fatalf("no inline headers while the cap says %d", c.WQEInlineMode)
		}
		if c.NICFlowTable && (prm.CapNICFlowTable.Get(gen) != 1 || prm.CapFTNICRXSupport.Get(ft) != 1) {
			t.Fatalf("NIC flow table without both caps")
		}
	})
}
