package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// asyncEQ is the one event queue a polling driver needs: every CQ names it,
// and firmware page requests arrive on it (kernel eq.c, rdma-core
// mlx5_vfio.c create one async EQ the same way).
type asyncEQ struct {
	buf     []byte
	iova    uint64
	logSize uint8
	eqn     uint32
	ci      uint32
}

const asyncEQLogSize = 8 // 32 + 128 spare, rounded up (rdma-core)

func (h *HCA) createAsyncEQ() error {
	out, err := h.simple(prm.OpAllocUAR, 0)
	if err != nil {
		return err
	}
	h.uar = uint32(prm.OutObjID.Get(out))
	size := (1 << asyncEQLogSize) * prm.EQESize
	buf, iova, err := h.bus.DMA.Alloc(size, size)
	if err != nil {
		return fmt.Errorf("mlx5: EQ memory: %w", err)
	}
	for i := 0; i < 1<<asyncEQLogSize; i++ {
		buf[i*prm.EQESize+prm.EQEOwnerOffset] = prm.EQEOwnerInit
	}
	in := make([]byte, prm.PASOffset+8)
	prm.InOpcode.Set(in, prm.OpCreateEQ)
	prm.EQCLogSize.Set(in, asyncEQLogSize)
	prm.EQCUARPage.Set(in, uint64(h.uar))
	prm.EQCIntr.Set(in, 0)
	prm.EQCLogPageSize.Set(in, uint64(log2(size)-prm.AdapterPageShift))
	// Overrun ignore: if the control plane stalls, the device drops
	// events rather than failing the function (Snabb connectx.lua sets oi
	// on its EQ); Service drains the EQ long before that in normal running.
	prm.EQCOI.Set(in, 1)
	// Page requests and port changes; command completions are polled
	// through the ownership bit, so no CMD events.
	prm.SetEventBit(in, prm.EventPageRequest)
	prm.SetEventBit(in, prm.EventPortChange)
	prm.SetEventBit(in, prm.EventCQError)
	prm.EQPAS.Set(in, iova)
	out, err = h.cmd.exec(in, 16)
	if err != nil {
		h.bus.DMA.Free(iova)
		return err
	}
	h.eq = &asyncEQ{buf: buf, iova: iova, logSize: asyncEQLogSize, eqn: uint32(prm.CreateEQOutEQN.Get(out))}
	// Publish CI 0 without arming: nothing waits on the interrupt.
	h.eqDoorbell()
	h.cmd.onWait = h.PollEvents
	return nil
}

func (h *HCA) eqDoorbell() {
	h.bus.MMIO.Write32(h.uar*prm.UARPageSize+prm.UAREQDoorbellNoArm, h.eq.ci&0xFFFFFF|h.eq.eqn<<24)
}

// PollEvents consumes the async EQ: page requests are served at once (on
// the page slot), port changes counted. It is called while any command
// waits, and by Service.
func (h *HCA) PollEvents() error {
	eq := h.eq
	if eq == nil {
		return nil
	}
	mask := uint32(1)<<eq.logSize - 1
	consumed := 0
	var firstErr error
	for consumed < 1<<eq.logSize {
		e := eq.buf[(eq.ci&mask)*prm.EQESize : (eq.ci&mask+1)*prm.EQESize]
		if loadByte(&e[prm.EQEOwnerOffset])&1 != uint8(eq.ci>>eq.logSize)&1 {
			break
		}
		typ := e[prm.EQEType]
		var data [28]byte
		copy(data[:], e[prm.EQEData:])
		eq.ci++
		consumed++
		if consumed%64 == 0 {
			h.eqDoorbell() // stay well inside the 128 spare entries
		}
		switch typ {
		case prm.EventPageRequest:
			// struct mlx5_eqe_page_req: ec_function, func_id, num_pages.
			fn := binary.BigEndian.Uint16(data[2:])
			n := int32(binary.BigEndian.Uint32(data[4:]))
			var err error
			if n > 0 {
				err = h.givePages(int(n), h.cmd.pageSlot, fn)
			} else if n < 0 {
				err = h.takePages(int(min(-n, 50000)), h.cmd.pageSlot)
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("page request for %d pages: %w", n, err)
			}
		case prm.EventPortChange:
			h.linkEvents.Add(1)
		}
	}
	if consumed > 0 {
		h.eqDoorbell()
	}
	return firstErr
}

func log2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}

// Service is the control plane's periodic duty, at least once a second (the
// kernel's health poll runs every 2 s, its EQ is interrupt driven): drain
// the async EQ, so page requests are answered and port changes seen
// without waiting for the next command, and check the health buffer and
// counter. An error means the function is dead or out of memory for the
// firmware; the port should be taken down.
func (h *HCA) Service() error {
	if h.closed || h.cmd == nil {
		return errors.New("mlx5: service on a closed function")
	}
	if err := h.cmd.eventErr; err != nil {
		h.cmd.eventErr = nil
		return err
	}
	if err := h.PollEvents(); err != nil {
		return err
	}
	return h.CheckHealth()
}

// RunService calls Service every interval on its own goroutine and hands
// each error to report (which may be nil). stop ends the goroutine and
// waits for it; call it before closing ports or the HCA, which must not
// run commands concurrently with Service.
func (h *HCA) RunService(interval time.Duration, report func(error)) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if err := h.Service(); err != nil && report != nil {
				report(err)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done); <-exited })
	}
}

// LinkEvents is the number of PORT_CHANGE events seen on the async EQ; safe
// to read while RunService runs.
func (h *HCA) LinkEvents() uint64 { return h.linkEvents.Load() }
