package dpsim

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// TestSemantics has one subtest per row of docs/mlx5-semantics.md: the
// model writes the entry from mlx5/prm's layouts (its own reading of the
// kernel and DPDK headers) and the driver (mlx5/dp, with its own constants)
// must read what the model meant.

// semFrame is an Ethernet frame of size bytes: IPv4 (IHL ihl words) or
// IPv6, UDP or TCP, optionally a fragment, seq in the payload's first word.
func semFrame(size int, v6, tcp, frag bool, ihl int, seq uint32) []byte {
	f := make([]byte, size)
	copy(f, []byte{2, 0, 0x5e, 0, 0, 1, 2, 0, 0, 0, 0, 2})
	l3 := 14
	proto := uint8(17)
	if tcp {
		proto = 6
	}
	var l4 int
	if v6 {
		binary.BigEndian.PutUint16(f[12:], 0x86DD)
		f[l3] = 0x60
		binary.BigEndian.PutUint16(f[l3+4:], uint16(size-l3-40))
		f[l3+6], f[l3+7] = proto, 64
		l4 = l3 + 40
	} else {
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		f[l3] = 0x40 | uint8(ihl)
		binary.BigEndian.PutUint16(f[l3+2:], uint16(size-l3))
		if frag {
			binary.BigEndian.PutUint16(f[l3+6:], 0x2000) // MF
		}
		f[l3+8], f[l3+9] = 64, proto
		copy(f[l3+12:], []byte{198, 18, 0, 1, 198, 19, 0, 2})
		var s uint32
		for i := 0; i < ihl*4; i += 2 {
			s += uint32(binary.BigEndian.Uint16(f[l3+i:]))
		}
		for s > 0xFFFF {
			s = s&0xFFFF + s>>16
		}
		binary.BigEndian.PutUint16(f[l3+10:], ^uint16(s))
		l4 = l3 + ihl*4
	}
	binary.BigEndian.PutUint32(f[size-4:], seq)
	_ = l4
	return f
}

func semTag(f []byte, vid uint16) []byte {
	t := make([]byte, len(f)+4)
	copy(t, f[:12])
	binary.BigEndian.PutUint16(t[12:], 0x8100)
	binary.BigEndian.PutUint16(t[14:], vid)
	copy(t[16:], f[12:])
	return t
}

type semRig struct {
	t    *testing.T
	port *dp.Port
	dev  *Device
	b    *fwd.Batch
}

func newSemRig(t *testing.T, c Config) *semRig {
	t.Helper()
	c.Name, c.PoolID = "sem", 7
	p, d, err := NewPort(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return &semRig{t: t, port: p, dev: d, b: fwd.NewBatch(fwd.MaxBatch)}
}

// recv injects frames as one batch and returns the packets the driver
// delivered, freeing nothing (call free).
func (r *semRig) recv(frames ...[]byte) []fwd.Packet {
	r.t.Helper()
	r.dev.RX[0].InjectBatch(frames)
	r.b.Reset()
	for i := 0; i < 16 && r.port.Rx(0, r.b) > 0; i++ {
	}
	if len(r.b.Pkts) != len(frames) {
		r.t.Fatalf("received %d of %d (driver %+v, model %+v)", len(r.b.Pkts), len(frames), r.port.Queue(0).RX.Stats, r.dev.RX[0].Stats)
	}
	for i := range r.b.Pkts {
		if !bytes.Equal(r.b.Pkts[i].Data(), frames[i]) {
			r.t.Fatalf("packet %d: % x, want % x", i, r.b.Pkts[i].Data()[:24], frames[i][:24])
		}
	}
	return r.b.Pkts
}

func (r *semRig) free() { r.port.Free(0, r.b) }

func wantInfo(t *testing.T, p *fwd.Packet, flags fwd.Flags, l3, l4 uint8, vlan uint16) {
	t.Helper()
	if p.Flags != flags || p.L3Off != l3 || p.L4Off != l4 || (flags&fwd.FlagVLAN != 0 && p.VLAN != vlan) {
		t.Fatalf("flags %#x L3 %d L4 %d VLAN %d, want %#x %d %d %d", p.Flags, p.L3Off, p.L4Off, p.VLAN, flags, l3, l4, vlan)
	}
}

const parsedV4UDP = fwd.FlagIPv4 | fwd.FlagUDP | fwd.FlagParsed

func TestSemantics(t *testing.T) {
	t.Run("owner-parity", func(t *testing.T) {
		// Owner bit = lap parity over many laps of a small CQ.
		r := newSemRig(t, Config{LogWQEs: 2, LogStrides: 3})
		for i := 0; i < 8*32; i++ {
			r.recv(semFrame(100, false, false, false, 5, uint32(i)))
			r.free()
		}
	})
	t.Run("l3-l4-type", func(t *testing.T) {
		r := newSemRig(t, Config{})
		ps := r.recv(semFrame(100, false, false, false, 5, 1), semFrame(100, false, true, false, 5, 2), semFrame(120, true, false, false, 0, 3))
		wantInfo(t, &ps[0], parsedV4UDP, 14, 34, 0)
		wantInfo(t, &ps[1], fwd.FlagIPv4|fwd.FlagTCP|fwd.FlagParsed, 14, 34, 0)
		wantInfo(t, &ps[2], fwd.FlagIPv6|fwd.FlagUDP|fwd.FlagParsed, 14, 54, 0)
		r.free()
	})
	for _, strip := range []bool{false, true} {
		t.Run(fmt.Sprintf("vlan-strip-%v", strip), func(t *testing.T) {
			// Bit 0 is "stripped": set only with vsd = 0; the L2 length
			// comes from the frame either way.
			r := newSemRig(t, Config{StripVLAN: strip})
			ps := r.recv(semTag(semFrame(100, false, false, false, 5, 1), 0x2123), semFrame(100, false, false, false, 5, 2))
			wantInfo(t, &ps[0], parsedV4UDP|fwd.FlagVLAN, 18, 38, 0x123)
			wantInfo(t, &ps[1], parsedV4UDP, 14, 34, 0)
			r.free()
		})
	}
	for _, strip := range []bool{false, true} {
		for _, d := range []int{0, 4} {
			t.Run(fmt.Sprintf("vlan-mixed-burst-strip-%v-D%d", strip, d), func(t *testing.T) {
				// Tagged frames at the start, middle and end of prefetch
				// groups and of the burst: the delivery loop leaves its
				// fast run for each and resumes after it.
				r := newSemRig(t, Config{StripVLAN: strip, Rx: dp.RxOptions{PrefetchDistance: d}})
				tagged := map[int]bool{0: true, 7: true, 8: true, 9: true, 15: true, 16: true, 23: true}
				var fs [][]byte
				for i := 0; i < 24; i++ {
					f := semFrame(100+i, false, false, false, 5, uint32(i))
					if tagged[i] {
						f = semTag(f, uint16(0x2000+i))
					}
					fs = append(fs, f)
				}
				ps := r.recv(fs...)
				for i := range ps {
					if tagged[i] {
						wantInfo(t, &ps[i], parsedV4UDP|fwd.FlagVLAN, 18, 38, uint16(i))
					} else {
						wantInfo(t, &ps[i], parsedV4UDP, 14, 34, 0)
					}
				}
				r.free()
				if s := r.port.Queue(0).RX.Stats; s.Packets != 24 || s.Bytes != 24*100+23*24/2+4*uint64(len(tagged)) {
					t.Fatalf("driver %+v", s)
				}
			})
		}
	}
	t.Run("ip-ext-opts", func(t *testing.T) {
		r := newSemRig(t, Config{})
		ps := r.recv(semFrame(100, false, false, false, 6, 1))
		wantInfo(t, &ps[0], fwd.FlagIPv4|fwd.FlagUDP, 0, 0, 0) // L4 offset unknown: the parser decides
		r.free()
	})
	t.Run("ip-frag", func(t *testing.T) {
		r := newSemRig(t, Config{})
		ps := r.recv(semFrame(100, false, false, true, 5, 1))
		wantInfo(t, &ps[0], parsedV4UDP|fwd.FlagFrag, 14, 34, 0)
		r.free()
	})
	t.Run("striding-byte-cnt", func(t *testing.T) {
		// wqe_id, stride index, consumed strides and byte count of every
		// packet across WQE boundaries (one stride per packet).
		r := newSemRig(t, Config{LogWQEs: 2, LogStrides: 3})
		for round := 0; round < 6; round++ {
			var fs [][]byte
			for i := 0; i < 7; i++ {
				fs = append(fs, semFrame(60+(round*7+i)*29%1400, false, false, false, 5, uint32(round*7+i)))
			}
			r.recv(fs...)
			r.free()
		}
		if s := r.port.Queue(0).RX.Stats; s.Malformed != 0 {
			t.Fatalf("driver %+v", s)
		}
	})
	for _, enh := range []bool{false, true} {
		for _, format := range []uint8{prm.MiniCQEHash, prm.MiniCQECsum, prm.MiniCQECsumStridx} {
			t.Run(fmt.Sprintf("compressed-enhanced-%v-format-%d", enh, format), func(t *testing.T) {
				r := newSemRig(t, Config{Compress: true, Enhanced: enh, MiniFormat: format, LogStrides: 7})
				for round := 0; round < 8; round++ {
					var fs [][]byte
					for i := 0; i < 40; i++ {
						fs = append(fs, semFrame(60+i*7, false, false, false, 5, uint32(round*40+i)))
					}
					r.recv(fs...)
					r.free()
				}
				if s := r.port.Queue(0).RX.Stats; s.CompSessions == 0 || s.Malformed != 0 {
					t.Fatalf("driver %+v", s)
				}
			})
		}
	}
	t.Run("tx-empwqe", func(t *testing.T) {
		// Ctrl segment (wqe_index, opcode 0x29, qpn/ds, CQ_UPDATE), data
		// segments, doorbell record and the TX CQE's wqe_counter freeing
		// the buffers: many SQ laps.
		r := newSemRig(t, Config{LogSQ: 6})
		var sent [][]byte
		r.dev.TX[0].Sink = func(f []byte) { sent = append(sent, bytes.Clone(f)) }
		for i := 0; i < 64; i++ {
			var fs [][]byte
			for k := 0; k < 20; k++ {
				fs = append(fs, semFrame(64+k, false, false, false, 5, uint32(i*20+k)))
			}
			r.recv(fs...)
			if n := r.port.Tx(0, r.b); n != 20 {
				t.Fatalf("Tx %d of 20 (%+v)", n, r.port.Queue(0).TX.Stats)
			}
		}
		if r.dev.Err() != nil || len(sent) != 64*20 || r.dev.TX[0].Stats.MPWQEs == 0 {
			t.Fatalf("model %v %+v, %d sent", r.dev.Err(), r.dev.TX[0].Stats, len(sent))
		}
	})
	t.Run("tx-send-inline-l2", func(t *testing.T) {
		r := newSemRig(t, Config{MinInline: prm.MinInlineL2})
		r.dev.TX[0].MinInline = prm.MinInlineL2
		r.recv(semFrame(100, false, false, false, 5, 1))
		if n := r.port.Tx(0, r.b); n != 1 || r.dev.Err() != nil || r.dev.TX[0].Stats.Sends != 1 {
			t.Fatalf("Tx %d, model %v %+v", n, r.dev.Err(), r.dev.TX[0].Stats)
		}
	})
	t.Run("err-cqe-syndrome", func(t *testing.T) {
		// An error CQE (opcode 13) with its syndrome in byte 55.
		r := newSemRig(t, Config{})
		r.dev.TX[0].MaxWQEBBs = 1
		var fs [][]byte
		for k := 0; k < 8; k++ {
			fs = append(fs, semFrame(64, false, false, false, 5, uint32(k)))
		}
		r.recv(fs...)
		r.port.Tx(0, r.b)
		r.port.Queue(0).TX.Reap()
		if s := r.port.Queue(0).TX.Stats; s.ErrCQEs != 1 || s.LastSyndrome != prm.CQESyndromeLocalQPOp {
			t.Fatalf("driver TX %+v", s)
		}
	})
}
