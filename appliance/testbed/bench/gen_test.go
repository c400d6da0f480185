package bench

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns/nstest"
)

// The flow set is n distinct flows (source address, source port), each a
// 60-byte frame with a valid IPv4 header checksum.
func TestFlowFrames(t *testing.T) {
	dst, src := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	fs := flowFrames(dst, src, 256)
	if len(fs) != 256 {
		t.Fatalf("%d frames, want 256", len(fs))
	}
	seen := map[[6]byte]bool{}
	for i, f := range fs {
		if len(f) != 60 || !bytes.Equal(f[0:6], dst) || !bytes.Equal(f[6:12], src) {
			t.Fatalf("frame %d: bad length or MACs: % x", i, f)
		}
		var sum uint32
		for j := 14; j < 34; j += 2 {
			sum += uint32(binary.BigEndian.Uint16(f[j:]))
		}
		for sum > 0xffff {
			sum = sum>>16 + sum&0xffff
		}
		if sum != 0xffff {
			t.Errorf("frame %d: IPv4 header checksum does not verify (%#x)", i, sum)
		}
		var k [6]byte
		copy(k[:4], f[26:30])
		copy(k[4:], f[34:36])
		if seen[k] {
			t.Errorf("frame %d repeats flow % x", i, k)
		}
		seen[k] = true
		if !bytes.Equal(f[26:29], []byte{198, 18, 20}) || f[29] < 1 || f[29] > 16 {
			t.Errorf("frame %d: source %v not one of 198.18.20.1-16", i, net.IP(f[26:30]))
		}
	}
}

// Each generator, alone into the XDP_DROP counter on the appliance's
// ingress veth, sends and is counted, and says what it costs per frame.
// Nothing about speed.
func TestFwdGenOnlyShort(t *testing.T) {
	nstest.RequireRoot(t)
	for _, gen := range []string{genAFXDP, genAFPacket} {
		res := measureFwd(t, FwdOptions{GenOnly: true, Gen: gen, Rounds: 1, Duration: time.Second, Warmup: 300 * time.Millisecond, MaxPackets: 5_000_000})
		if len(res.Runs) != 1 {
			t.Fatalf("%s: %d runs, want 1", gen, len(res.Runs))
		}
		r := res.Runs[0]
		if r.Side != "gen" || r.Sent == 0 || r.Forwarded == 0 || res.GenPPS == 0 {
			t.Errorf("%s: side %q sent %d counted %d (median %v pps)", gen, r.Side, r.Sent, r.Forwarded, res.GenPPS)
		}
		if r.Forwarded > r.Sent+r.Sent/10+1000 {
			t.Errorf("%s: sink counted %d, more than the %d sent in the window", gen, r.Forwarded, r.Sent)
		}
	}
}
