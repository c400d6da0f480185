package mlx5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/mlx5/model/sim"
	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// budgetDMA fails allocations past a fixed number of bytes, as the VFIO
// hugepage pool does when it runs out.
type budgetDMA struct {
	DMA
	left int
}

func (b *budgetDMA) Alloc(size, align int) ([]byte, uint64, error) {
	if size > b.left {
		return nil, 0, errors.New("budget exhausted")
	}
	b.left -= size
	return b.DMA.Alloc(size, align)
}

// FuzzPollEvents writes arbitrary event entries into the async EQ of a
// driver brought up on the model and drains them. Whatever the entries say
// (any type, any function id, any signed page count), the driver consumes
// exactly the entries the device handed over, counts the port changes among
// them, and afterwards holds exactly the pages the device says it holds.
func FuzzPollEvents(f *testing.F) {
	page := func(n int32) []byte {
		e := make([]byte, prm.EQESize)
		e[prm.EQEType] = prm.EventPageRequest
		binary.BigEndian.PutUint32(e[prm.EQEPageNumPages:], uint32(n))
		return e
	}
	port := make([]byte, prm.EQESize)
	port[prm.EQEType] = prm.EventPortChange
	f.Add(page(8))
	f.Add(page(-4))
	f.Add(page(1 << 30)) // more than the DMA budget: CANT_GIVE
	f.Add(bytes.Repeat(page(1<<30), 255))
	f.Add(append(page(2), port...))
	f.Add(make([]byte, 3*prm.EQESize))
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := sim.NewMemory()
		dev := sim.New(sim.DefaultConfig(), mem)
		opt := Options{PollInterval: time.Millisecond, CommandTimeout: 200 * time.Millisecond,
			InitTimeout: 200 * time.Millisecond, Sleep: func(time.Duration) {}}
		dma := &budgetDMA{DMA: mem, left: 4 << 20}
		h, err := Open(Bus{MMIO: dev, DMA: dma, Config: dev}, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		eq := h.eq
		size := uint32(1) << eq.logSize
		k := min(uint32(len(data)/prm.EQESize), size-1)
		ci0, links0 := eq.ci, h.LinkEvents()
		var ports uint64
		for i := uint32(0); i <= k; i++ {
			ci := ci0 + i
			e := eq.buf[(ci&(size-1))*prm.EQESize:][:prm.EQESize]
			owned := uint8(ci>>eq.logSize) & 1
			if i == k {
				e[prm.EQEOwnerOffset] = owned ^ 1 // not handed over yet
				break
			}
			copy(e, data[i*prm.EQESize:])
			e[prm.EQEOwnerOffset] = e[prm.EQEOwnerOffset]&^1 | owned
			if e[prm.EQEType] == prm.EventPortChange {
				ports++
			}
		}
		_ = h.PollEvents() // a request beyond the budget may fail; it must not wedge
		if got := eq.ci - ci0; got != k {
			t.Fatalf("consumed %d entries, %d were handed over", got, k)
		}
		if got := h.LinkEvents() - links0; got != ports {
			t.Fatalf("counted %d port changes, %d were posted", got, ports)
		}
		if h.PagesGiven() != dev.PagesHeld() {
			t.Fatalf("driver gave %d pages, device holds %d", h.PagesGiven(), dev.PagesHeld())
		}
	})
}
