package mlx5

import (
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
