package web

import (
	"context"
	"sync"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// regressionCache keeps the regressions each run record holds, by the
// record's CID (a record never changes; a run's ref moves to a new one),
// so that a page learns which receipts a recheck regressed from the runs'
// refs and the records it has not read before.
type regressionCache struct {
	mu     sync.Mutex
	byRoot map[cid.Cid][]scheduler.Regression
}

// regressionCacheMax bounds the records whose regressions are kept.
const regressionCacheMax = 4096

// standing is what the runs of a store say of receipts after they were
// made: which a recheck regressed, with the first run by id that records
// it (as scheduler.Regressions), and which runs' records cannot be read
// (whether they regressed a receipt is not known).
type standing struct {
	regressed scheduler.RegressionSet
	unread    []string
}

// standing reads what the runs of st say now. err is the store's or
// ctx's.
func (c *regressionCache) standing(ctx context.Context, st cas.Store) (standing, error) {
	refs, err := st.Refs(ctx, scheduler.RefNamespace)
	if err != nil {
		return standing{}, err
	}
	out := standing{regressed: scheduler.RegressionSet{}}
	for _, r := range refs {
		c.mu.Lock()
		regs, ok := c.byRoot[r.CID]
		c.mu.Unlock()
		if !ok {
			rec, err := scheduler.LoadRecordAt(ctx, st, r.CID)
			if err != nil {
				if ctx.Err() != nil {
					return standing{}, ctx.Err()
				}
				out.unread = append(out.unread, r.Name)
				continue
			}
			regs = scheduler.RegressionsOf(r.Name, rec)
			c.mu.Lock()
			if c.byRoot == nil || len(c.byRoot) >= regressionCacheMax {
				c.byRoot = map[cid.Cid][]scheduler.Regression{}
			}
			c.byRoot[r.CID] = regs
			c.mu.Unlock()
		}
		for _, g := range regs {
			if _, ok := out.regressed[g.Event.Receipt.Cid]; !ok {
				out.regressed[g.Event.Receipt.Cid] = g
			}
		}
	}
	return out, nil
}

// apply judges the verdict d of receipt by what the runs say of it: a
// PASS a recheck regressed (the receipt under any CID of its bytes) reads
// taken back; while a run's record cannot be read, a PASS reads not
// established, for whether that run regressed it is not known.
func (s standing) apply(ctx context.Context, st cas.Store, receipt cid.Cid, d Verdict) (Verdict, error) {
	g, ok, err := s.regressed.Of(ctx, st, receipt)
	if err != nil {
		return d, err
	}
	if ok {
		d.Regressed = g.String()
		if d.Status == ledger.StatusPass {
			d.Status = takenBack
		}
	}
	if len(s.unread) > 0 && d.Status == ledger.StatusPass {
		d.Status = unknownStanding
	}
	return d, nil
}
