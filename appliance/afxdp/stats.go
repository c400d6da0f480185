package afxdp

import "github.com/ovfwd/ovfwd/fwd"

// Stats are a port's counters, summed over its queues.
type Stats struct {
	RxPackets, RxBytes uint64
	TxPackets, TxBytes uint64
	Drops              [fwd.NumDropReasons]uint64 // drops the port made itself (tx_full, link_down)
	KickErrors         uint64                     // TX sendto errors other than "try again"
	TxKicks            uint64                     // TX sendto calls (syscalls spent pushing the TX ring)
	AllocShort         uint64                     // Alloc calls that got fewer frames than asked
	BadFree            uint64                     // frames handed back that were not ours (a caller bug)
	// From the kernel (XDP_STATISTICS).
	KernelRxDropped, KernelRxRingFull, KernelFillEmpty, KernelTxInvalid uint64
}

// Stats reads the counters; safe from any goroutine while workers run.
func (p *Port) Stats() Stats {
	var s Stats
	for _, qu := range p.queues {
		s.RxPackets += qu.st.rxPackets.Load()
		s.RxBytes += qu.st.rxBytes.Load()
		s.TxPackets += qu.st.txPackets.Load()
		s.TxBytes += qu.st.txBytes.Load()
		s.Drops[fwd.DropTxFull] += qu.st.txFull.Load()
		s.Drops[fwd.DropLinkDown] += qu.st.linkDown.Load()
		s.KickErrors += qu.st.kickErrors.Load()
		s.TxKicks += qu.st.txKicks.Load()
		s.AllocShort += qu.st.allocShort.Load()
		s.BadFree += qu.st.badFree.Load()
		if k, err := xdpStatistics(qu.fd); err == nil {
			s.KernelRxDropped += k.Rx_dropped
			s.KernelRxRingFull += k.Rx_ring_full
			s.KernelFillEmpty += k.Rx_fill_ring_empty_descs
			s.KernelTxInvalid += k.Tx_invalid_descs
		}
	}
	return s
}
