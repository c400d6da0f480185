package fwd

import "github.com/ovfwd/ovfwd/fwd/nat"

// Tunnel hook: datagrams to the tunnel's UDP port on our addresses are
// collected into w.decap during a received batch and handed to Decap in one
// call; packets routed to a tunnel peer are collected into w.encap and
// handed to Encap in one call. What comes out is routed again: inner packets
// may go back into the tunnel (peer to peer) but not be decapsulated again;
// outer packets may not re-enter the tunnel.

func (w *Worker) runTunnel(t *tables) {
	if w.decap.Len() > 0 {
		w.runDecap(t)
	}
	if w.encap.Len() > 0 {
		w.runEncap(t)
	}
}

// runDecap decrypts the decap batch and routes its inner packets as a
// received batch is routed: parsed, martians dropped, parked in w.fib and
// looked up together (routePending).
func (w *Worker) runDecap(t *tables) {
	if w.fib.busy {
		// From within routePending (a local delivery filled the batch):
		// its arrays are in use, so one at a time.
		t.tunnel.Decap(w.q, w.decap)
		for i := range w.decap.Pkts {
			w.afterTunnel(t, &w.decap.Pkts[i], rInner|rFromPeer)
		}
		w.decap.Reset()
		return
	}
	if w.fib.n > 0 {
		// A full decap batch in the middle of a received one: w.fib
		// holds one batch at a time, so the received packets parked so
		// far go first.
		w.routePending(t, rParsed)
	}
	t.tunnel.Decap(w.q, w.decap)
	for i := range w.decap.Pkts {
		p := &w.decap.Pkts[i]
		if p.Verdict != VerdictForward {
			w.afterTunnel(t, p, rInner|rFromPeer)
			continue
		}
		if r := Parse(p); r != DropNone { // Decap set FlagL3Only
			w.drop(p, r)
			continue
		}
		// A client's packet: martians as routeFrame tests them.
		if p.Flags&FlagIPv4 != 0 {
			if h := ip4Hdr(p); martian4Candidate(t, h) && martian4(t, h) {
				w.drop(p, DropMartian)
				continue
			}
		} else if h := ip6Hdr(p); martian6Candidate(t, h) && martian6(t, h) {
			w.drop(p, DropMartian)
			continue
		}
		w.parkInner(t, p)
	}
	if w.fib.n > 0 {
		w.routePending(t, rInner|rFromPeer|rParsed)
	}
	w.decap.Reset()
}

// parkInner parks an inner packet for routePending as routeFrame parks a
// received one (NAT's prefetch included: a full-tunnel client's traffic
// is what NAT translates most).
func (w *Worker) parkInner(t *tables, p *Packet) {
	f := &w.fib
	n := f.n
	if n >= f.max {
		w.routeIP(t, p, rInner|rFromPeer|rParsed)
		return
	}
	if p.Flags&FlagIPv4 != 0 {
		f.dst4[f.n4&(MaxBatch-1)] = [4]byte(ip4Hdr(p)[16:20])
		f.n4++
		if w.nat.Active() {
			var hint uint64
			if p.Flags&(FlagTCP|FlagUDP) != 0 { // as in routeFrame
				x := int(p.Off) + int(p.L3Off)
				hint = nat.PrefetchIPv4(w.nat, (*[nat.PrefetchLen]byte)(p.Buf[x:x+nat.PrefetchLen]))
			}
			f.natSlot[n&(MaxBatch-1)] = hint
		}
	} else {
		f.dst6[f.n6&(MaxBatch-1)] = [16]byte(ip6Hdr(p)[24:40])
		f.n6++
		f.natSlot[n&(MaxBatch-1)] = 0
	}
	f.pend[n&(MaxBatch-1)] = p
	f.n = n + 1
}

func (w *Worker) runEncap(t *tables) {
	t.tunnel.Encap(w.q, w.encap)
	for i := range w.encap.Pkts {
		w.afterTunnel(t, &w.encap.Pkts[i], rOrigin|rNoTunnel)
	}
	w.encap.Reset()
}

func (w *Worker) afterTunnel(t *tables, p *Packet, how uint8) {
	switch p.Verdict {
	case VerdictForward:
		p.Flags |= FlagL3Only
		if r := Parse(p); r != DropNone {
			w.drop(p, r)
			return
		}
		if how&rInner != 0 && martian(t, p) { // out of the tunnel: a client's packet
			w.drop(p, DropMartian)
			return
		}
		w.routeIP(t, p, how)
	case VerdictDrop:
		r := p.Reason
		if r == DropNone {
			r = DropTunnel
		}
		w.drop(p, r)
	default: // consumed: the tunnel took what it needed; the buffer is ours to free
		w.release(p)
	}
}

// toDecap adds an outer datagram to the decap batch.
func (w *Worker) toDecap(t *tables, p *Packet) {
	if w.decap.Room() == 0 {
		w.runDecap(t)
	}
	p.Verdict = VerdictForward
	w.decap.Add(p)
}

func (w *Worker) toEncap(t *tables, p *Packet) {
	p.Verdict = VerdictForward
	w.encap.Add(p)
	if w.encap.Room() == 0 {
		w.runEncap(t)
	}
}
