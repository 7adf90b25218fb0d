package podapi

import (
	"sync"

	"k8s.io/klog/v2"
)

// RVBlock is how many resourceVersions are reserved durably at a time.
// Status-only updates are not checkpointed, but their resourceVersions must
// never be handed out again after a restart (a resumed watch would skip
// events): the checkpoint's revision counter is moved a block ahead, and a
// restarted daemon starts above the block. One fsync per block, not per
// status change.
var RVBlock uint64 = 1000

// highWater is the durable reservation of resourceVersions.
type highWater struct {
	reserve func(uint64) error // checkpoint.Store.Reserve

	mu        sync.Mutex
	reserved  uint64 // durable: every rv <= reserved may be handed out
	extending bool
}

// reservationPlan is the pure decision of cover: whether rv needs a
// synchronous reservation first (the block is used up), and whether to
// extend the block in the background (half of it is used).
func reservationPlan(rv, reserved, block uint64, extending bool) (syncReserve, asyncExtend bool) {
	if rv > reserved {
		return true, false
	}
	return false, !extending && reserved-rv < block/2
}

// cover makes sure rv is durably reserved before it is handed out. It is
// called with the registry's writers' lock held (never the readers'): it writes synchronously only when a
// burst has used the whole block before the background extension landed.
func (h *highWater) cover(rv uint64) error {
	h.mu.Lock()
	syncReserve, async := reservationPlan(rv, h.reserved, RVBlock, h.extending)
	if async {
		h.extending = true
	}
	reserved := h.reserved
	h.mu.Unlock()
	if syncReserve {
		target := rv + RVBlock
		if err := h.reserve(target); err != nil {
			return err
		}
		h.set(target)
		return nil
	}
	if async {
		go func() {
			target := reserved + RVBlock
			err := h.reserve(target)
			h.mu.Lock()
			h.extending = false
			h.mu.Unlock()
			if err != nil {
				klog.ErrorS(err, "Reserving resourceVersions ahead failed; the next write retries")
				return
			}
			h.set(target)
		}()
	}
	return nil
}

func (h *highWater) set(v uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v > h.reserved {
		h.reserved = v
	}
}
