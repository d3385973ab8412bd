package web

import (
	"context"
	"sync"

	"github.com/haygent/hg/cas"
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

// regressions returns every receipt a recheck regressed in a run of st,
// with the first run by id that records it, as scheduler.Regressions
// does, and the runs whose records cannot be read (whether they
// regressed a receipt is not known). err is the store's or ctx's.
func (c *regressionCache) regressions(ctx context.Context, st cas.Store) (map[cid.Cid]scheduler.Regression, []string, error) {
	refs, err := st.Refs(ctx, scheduler.RefNamespace)
	if err != nil {
		return nil, nil, err
	}
	var unread []string
	out := map[cid.Cid]scheduler.Regression{}
	for _, r := range refs {
		c.mu.Lock()
		regs, ok := c.byRoot[r.CID]
		c.mu.Unlock()
		if !ok {
			rec, err := scheduler.LoadRecordAt(ctx, st, r.CID)
			if err != nil {
				if ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				unread = append(unread, r.Name)
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
			if _, ok := out[g.Event.Receipt.Cid]; !ok {
				out[g.Event.Receipt.Cid] = g
			}
		}
	}
	return out, unread, nil
}
