package mlx5

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ovfwd/ovfwd/mlx5/prm"
)

// supplyPages asks how many pages a bring-up stage needs (QUERY_PAGES boot
// or init) and gives them (MANAGE_PAGES GIVE), as kernel pagealloc.c
// mlx5_satisfy_startup_pages does.
func (h *HCA) supplyPages(stage uint16) error {
	out, err := h.simple(prm.OpQueryPages, stage)
	if err != nil {
		return err
	}
	n := int32(prm.QueryPagesOutNumPages.Get(out))
	if n < 0 {
		return h.takePages(int(-n), ordinarySlot)
	}
	if err := h.givePages(int(n), ordinarySlot, 0); err != nil {
		var pb *PageBudgetError
		if errors.As(err, &pb) {
			pb.Stage, pb.Asked = stageName(stage), int(n)+len(h.pages)
		}
		return err
	}
	return nil
}

func stageName(stage uint16) string {
	switch stage {
	case prm.PagesBoot:
		return "boot"
	case prm.PagesInit:
		return "init"
	}
	return "run time"
}

// PageBudgetError is a firmware page request the DMA budget could not
// meet. Asked is the total the firmware wants to hold, so a caller can size
// the budget from it and try again.
type PageBudgetError struct {
	Stage string
	Asked int // pages (4 KiB) the firmware asked to hold in total
	Err   error
}

func (e *PageBudgetError) Error() string {
	return fmt.Sprintf("mlx5: firmware asks for %d pages (%d KiB) at %s and the DMA budget is short: %v; reserve more 2 MiB hugepages",
		e.Asked, e.Asked*4, e.Stage, e.Err)
}

func (e *PageBudgetError) Unwrap() error { return e.Err }

// givePages allocates n 4 KiB pages and hands them to the firmware on the
// given command slot (ordinarySlot, or the page slot while another command waits) for
// function fn (0: this function). When memory runs out it says so to the
// firmware with MANAGE_PAGES CANT_GIVE, as the kernel's give_pages does,
// so a command the firmware holds for the pages can complete (with an
// error) instead of waiting forever.
func (h *HCA) givePages(n int, slot int, fn uint16) error {
	for n > 0 {
		batch := min(n, maxPagesPerCommand)
		in := make([]byte, 16+8*batch)
		prm.InOpcode.Set(in, prm.OpManagePages)
		prm.InOpMod.Set(in, prm.ManagePagesGive)
		prm.ManagePagesFunctionID.Set(in, uint64(fn))
		prm.ManagePagesInNum.Set(in, uint64(batch))
		var given []uint64
		for i := 0; i < batch; i++ {
			buf, iova, err := h.bus.DMA.Alloc(prm.AdapterPageSize, prm.AdapterPageSize)
			if err != nil {
				for _, g := range given {
					h.bus.DMA.Free(g)
					delete(h.pages, g)
				}
				var cerr error
				if slot == h.cmd.pageSlot {
					// Only requests from an event: at boot and init the
					// caller fails bring-up itself (kernel: notify_fail).
					cant := make([]byte, 16)
					prm.InOpcode.Set(cant, prm.OpManagePages)
					prm.InOpMod.Set(cant, prm.ManagePagesCantGive)
					prm.ManagePagesFunctionID.Set(cant, uint64(fn))
					_, cerr = h.cmd.execSlot(slot, cant, 16)
				}
				return errors.Join(&PageBudgetError{Stage: "run time", Asked: n + len(h.pages), Err: err}, cerr)
			}
			h.pages[iova] = buf
			given = append(given, iova)
			binary.BigEndian.PutUint64(in[16+8*i:], iova)
		}
		if _, err := h.cmd.execSlot(slot, in, 16); err != nil {
			// The firmware took none of them.
			for _, g := range given {
				h.bus.DMA.Free(g)
				delete(h.pages, g)
			}
			return err
		}
		n -= batch
	}
	return nil
}

// takePages asks the firmware to return up to n pages and frees those it
// returns. A page it never got is a fatal inconsistency.
func (h *HCA) takePages(n int, slot int) error {
	for n > 0 {
		batch := min(n, maxPagesPerCommand)
		in := make([]byte, 16)
		prm.InOpcode.Set(in, prm.OpManagePages)
		prm.InOpMod.Set(in, prm.ManagePagesTake)
		prm.ManagePagesInNum.Set(in, uint64(batch))
		out, err := h.cmd.execSlot(slot, in, 16+8*batch)
		if err != nil {
			return err
		}
		got := int(prm.ManagePagesOutNum.Get(out))
		if got > batch {
			return fmt.Errorf("mlx5: MANAGE_PAGES TAKE returned %d pages, asked for %d", got, batch)
		}
		for i := 0; i < got; i++ {
			iova := binary.BigEndian.Uint64(out[16+8*i:])
			if _, ok := h.pages[iova]; !ok {
				return fmt.Errorf("mlx5: MANAGE_PAGES TAKE returned page %#x that was never given", iova)
			}
			delete(h.pages, iova)
			h.bus.DMA.Free(iova)
		}
		if got == 0 {
			return nil
		}
		n -= got
	}
	return nil
}

// reclaimPages takes back every page after TEARDOWN_HCA (kernel order:
// teardown, reclaim, disable).
func (h *HCA) reclaimPages() error {
	for tries := 0; len(h.pages) > 0 && tries < 1+len(h.pages)/maxPagesPerCommand+1; tries++ {
		before := len(h.pages)
		if err := h.takePages(len(h.pages), ordinarySlot); err != nil {
			return err
		}
		if len(h.pages) == before {
			break
		}
	}
	if len(h.pages) > 0 {
		return fmt.Errorf("mlx5: firmware kept %d pages after teardown", len(h.pages))
	}
	return nil
}

// PagesGiven is the number of pages the firmware holds.
func (h *HCA) PagesGiven() int { return len(h.pages) }
