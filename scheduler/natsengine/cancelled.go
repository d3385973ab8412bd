package natsengine

import (
	"sync"
	"time"
)

// An engine that gives up on an invocation publishes its id on
// PREFIX.cancel.ID. A worker running it stops it; and every worker
// remembers the id for a while, so that one that takes the invocation
// later, in a batch whose other members are still wanted (its engine
// could not take the message off the queue for them), or queued again on
// its own, does not start it. Best effort: a worker that was not
// connected when the cancel went out does not know of it, and runs the
// invocation if its deadline has not passed; its engine drops the
// outcome.

// cancelledFor is how long a worker remembers a cancelled invocation,
// and cancelledMax how many it remembers at most (the oldest go first).
const (
	cancelledFor = time.Hour
	cancelledMax = 1 << 14
)

// cancelledSet is the invocations a worker heard were given up on.
type cancelledSet struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string // ids in the order they came, for bounding
}

func (c *cancelledSet) add(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil {
		c.at = map[string]time.Time{}
	}
	if _, ok := c.at[id]; ok {
		return
	}
	c.at[id] = time.Now()
	c.order = append(c.order, id)
	for len(c.order) > cancelledMax || (len(c.order) > 0 && time.Since(c.at[c.order[0]]) > cancelledFor) {
		delete(c.at, c.order[0])
		c.order = c.order[1:]
	}
}

func (c *cancelledSet) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[id]
	return ok && time.Since(t) <= cancelledFor
}
