package fwd

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

func (w *Worker) runDecap(t *tables) {
	t.tunnel.Decap(w.q, w.decap)
	for i := range w.decap.Pkts {
		w.afterTunnel(t, &w.decap.Pkts[i], rInner|rFromPeer)
	}
	w.decap.Reset()
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
