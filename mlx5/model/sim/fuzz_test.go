package sim

import (
	"testing"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// FuzzModelCommand posts arbitrary command entries and input mailboxes to
// the model after a valid bring-up prefix. The model parses driver-made
// bytes, so it must never panic and must either complete the slot (with a
// delivery or command status) or leave it owned by hardware.
func FuzzModelCommand(f *testing.F) {
	seed := func(op, opMod uint16, n int) []byte {
		b := make([]byte, 64+n)
		in := hdr(op, opMod, n)
		copy(b[64:], in)
		return b
	}
	f.Add(seed(prm.OpEnableHCA, 0, 16), uint16(16))
	f.Add(seed(prm.OpCreateCQ, 0, prm.PASOffset+8), uint16(16))
	f.Add(seed(prm.OpManagePages, prm.ManagePagesGive, 64), uint16(16))
	f.Add(seed(prm.OpSetFlowTableEntry, 0, prm.SetFTEInBaseLen+8), uint16(16))
	f.Add(seed(prm.OpCreateRQT, 0, prm.CreateRQTInBaseLen+16), uint16(16))
	f.Add(seed(prm.OpModifyNICVportContext, 0, prm.ModifyNICVportInLen+8), uint16(16))
	f.Fuzz(func(t *testing.T, data []byte, outLen uint16) {
		if len(data) < 64+16 || len(data) > 64+8192 {
			return
		}
		r := initialized(t) // object commands are reachable
		in := data[64:]
		_, _, _, _ = r.post(in, int(outLen)%9000+16, func(e []byte) {
			// Let the fuzzer drive the entry's control bytes but keep the
			// pointers valid often enough to reach the command parsers.
			e[prm.CmdEntryType] ^= data[0] & 0x8
			if data[1]&1 == 1 {
				copy(e[prm.CmdEntryInPtr:prm.CmdEntryInPtr+8], data[8:16])
			}
			e[prm.CmdEntryToken] ^= data[2] & 1
		})
	})
}
