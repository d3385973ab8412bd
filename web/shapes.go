package web

import (
	"context"
	"sync"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// runShape is what a run page draws of a stored Work Order: its nodes,
// their needs, its outcome and its waves. A Work Order is named by its
// CID, so its shape never changes: a server keeps the shapes it read
// (decoding a Work Order of 10,000 nodes costs more than the rest of its
// page). A shape is not a verdict: every receipt is still verified for
// each page.
type runShape struct {
	obj      dag.Object // the Work Order as stored
	wo       *dag.WorkOrder
	waves    [][]string
	packages []cid.Cid // the distinct package trees its nodes run
}

// shapeCache holds the shapes of the last shapeCacheMax Work Orders read.
type shapeCache struct {
	mu    sync.Mutex
	m     map[cid.Cid]*runShape
	order []cid.Cid
}

const shapeCacheMax = 16

// shape returns the shape of the Work Order rec names, read from st the
// first time.
func (c *shapeCache) shape(ctx context.Context, st cas.Store, rec *scheduler.Record) (*runShape, error) {
	key := rec.WorkOrder.Cid
	c.mu.Lock()
	s, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	obj, wo, err := scheduler.LoadWorkOrder(ctx, st, rec)
	if err != nil {
		return nil, err
	}
	s = &runShape{obj: obj, wo: wo, waves: wo.Waves()}
	seen := map[cid.Cid]bool{}
	for _, name := range wo.Order {
		// A stored Work Order names each node's package by its CID.
		if c, err := cas.ParseCID(wo.Nodes[name].Haygent); err == nil && !seen[c] {
			seen[c] = true
			s.packages = append(s.packages, c)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[cid.Cid]*runShape{}
	}
	if _, ok := c.m[key]; !ok {
		if len(c.order) >= shapeCacheMax {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
		c.m[key] = s
		c.order = append(c.order, key)
	}
	return s, nil
}
