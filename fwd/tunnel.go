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
	t.tunnel.Decap(w.q, w.decap)
	prev := w.beginPark(t, rInner|rFromPeer)
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
		w.park(t, p)
	}
	w.endPark(t, prev)
	w.decap.Reset()
}

// beginPark routes what w.fib holds (a received batch's packets, when a
// full tunnel batch runs in the middle of it: w.fib holds one kind at a
// time) and makes it park packets that came how; endPark routes them and
// restores the kind beginPark returned.
func (w *Worker) beginPark(t *tables, how uint8) (prev uint8) {
	if w.fib.n > 0 {
		w.routePending(t)
	}
	prev, w.fib.how = w.fib.how, how|rParsed
	return prev
}

func (w *Worker) endPark(t *tables, prev uint8) {
	if w.fib.n > 0 {
		w.routePending(t)
	}
	w.fib.how = prev
}

// park parks a packet out of the tunnel for routePending (between
// beginPark and endPark) as routeFrame parks a received one, NAT's
// prefetch included (a full-tunnel client's traffic is what NAT
// translates most).
func (w *Worker) park(t *tables, p *Packet) {
	f := &w.fib
	n := f.n
	how := f.how
	if n >= f.max {
		w.routeIP(t, p, how)
		return
	}
	if p.Flags&FlagIPv4 != 0 {
		f.dst4[f.n4&(MaxBatch-1)] = [4]byte(ip4Hdr(p)[16:20])
		f.n4++
		if w.nat.Active() {
			var hint uint64
			if p.Flags&(FlagTCP|FlagUDP) != 0 && how&rOrigin == 0 { // as in routeFrame
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

// runEncap encrypts the encap batch and routes the datagrams towards the
// peers' endpoints (each looked up: the way to an endpoint may change),
// together as runDecap routes its inner packets, unless routePending is
// forwarding (a full batch in the middle of a received one).
func (w *Worker) runEncap(t *tables) {
	t.tunnel.Encap(w.q, w.encap)
	busy := w.fib.busy
	var prev uint8
	if !busy {
		prev = w.beginPark(t, rOrigin|rNoTunnel)
	}
	for i := range w.encap.Pkts {
		p := &w.encap.Pkts[i]
		if busy || p.Verdict != VerdictForward {
			w.afterTunnel(t, p, rOrigin|rNoTunnel)
			continue
		}
		if r := parseOuter(p); r != DropNone {
			w.drop(p, r)
			continue
		}
		w.park(t, p)
	}
	if !busy {
		w.endPark(t, prev)
	}
	w.encap.Reset()
}

// parseOuter parses a datagram out of Encap, unless Encap said it wrote
// the headers (FlagParsed: the Tunnel contract).
func parseOuter(p *Packet) DropReason {
	p.Flags |= FlagL3Only
	if p.Flags&FlagParsed != 0 {
		return DropNone
	}
	return Parse(p)
}

func (w *Worker) afterTunnel(t *tables, p *Packet, how uint8) {
	switch p.Verdict {
	case VerdictForward:
		r := DropNone
		if how&rNoTunnel != 0 {
			r = parseOuter(p)
		} else {
			p.Flags |= FlagL3Only
			r = Parse(p)
		}
		if r != DropNone {
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

// toEncap adds p to the encap batch, running a full one first (not after:
// a received batch's worth then waits for runTunnel, out of routePending,
// and is routed together).
func (w *Worker) toEncap(t *tables, p *Packet) {
	if w.encap.Room() == 0 {
		w.runEncap(t)
	}
	p.Verdict = VerdictForward
	w.encap.Add(p)
}
