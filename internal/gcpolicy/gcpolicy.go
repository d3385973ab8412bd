// Package gcpolicy sets how often a scheduling hg process collects
// garbage.
//
// A scheduler keeps little per node and allocates quickly: every node it
// runs encodes, hashes, signs and decodes some 60 KB of objects that die at
// once, while what it keeps (the plan, the run record, the outputs of done
// nodes) grows by a few kilobytes a node. With Go's default (GOGC=100) the
// collector ran every few megabytes, and its marking took a fifth of a
// run's CPU. Percent collects a quarter as often, for a heap at most five
// times the live data, while that is small. Once the live data is large
// (a run of 100,000 nodes in memory holds a gigabyte of blocks), five times
// it would be gigabytes of memory touched for little gain: the collector
// then keeps at most [Headroom] above the live data, and never less than
// Go's default. hg run, hg resume, hg worker and hg verify apply it: the
// verifier decodes every object of every receipt and drops it at once,
// and the bound keeps a large bundle held in memory (hg verify --bundle)
// from growing fivefold.
package gcpolicy

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Percent is the scheduler's garbage collection target (see
// [debug.SetGCPercent]) while the live heap is small.
const Percent = 400

// Headroom is how much the heap may grow above the live data between two
// collections, once Percent would allow more; the target never drops below
// Go's default of 100.
const Headroom = 1 << 30

// headroom is Headroom, smaller in tests.
var headroom atomic.Uint64

func init() { headroom.Store(Headroom) }

// percentFor is the target for a live heap of live bytes.
func percentFor(live uint64) int {
	if live == 0 {
		return Percent
	}
	return int(max(100, min(Percent, headroom.Load()*100/live)))
}

// Apply sets [Percent] unless GOGC is set in the environment, which wins,
// as it does for any Go program. So that a heap five times the live data
// never crowds out the machine, it also sets a soft memory limit of half
// the physical memory (where that is known) unless GOMEMLIMIT is set: near
// the limit the collector runs as often as it must. It returns a function
// that restores the settings it found.
//
// Calls may overlap (hg mcp runs Work Orders and verifications at once):
// the first sets, the others hold, and the settings are restored when the
// last of them restores, so that no interleaving leaves them changed.
func Apply() (restore func()) {
	held.Lock()
	defer held.Unlock()
	held.n++
	if held.n == 1 {
		held.restore = apply()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			held.Lock()
			defer held.Unlock()
			held.n--
			if held.n == 0 {
				held.restore()
				held.restore = nil
			}
		})
	}
}

// held counts the Apply calls not yet restored, and keeps the first's
// restore.
var held struct {
	sync.Mutex
	n       int
	restore func()
}

// apply is Apply's work, once.
func apply() (restore func()) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		return func() {}
	}
	old := debug.SetGCPercent(Percent)
	stop := adapt()
	oldLimit := int64(-1) // unchanged
	if v, ok := os.LookupEnv("GOMEMLIMIT"); !ok || v == "" {
		if mem := physicalMemory(); mem > 0 {
			oldLimit = debug.SetMemoryLimit(int64(min(mem/2, math.MaxInt64)))
		}
	}
	return func() {
		stop()
		debug.SetGCPercent(old)
		if oldLimit >= 0 {
			debug.SetMemoryLimit(oldLimit)
		}
	}
}

// adapt sets the target from the live heap after every collection, until
// the returned function is called. A finalizer on an object nothing holds
// runs once after each collection; it sets the target and arms itself
// again.
func adapt() (stop func()) {
	var mu sync.Mutex
	stopped := false
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := Percent
	type sentinel struct{ _ [64]byte } // too big for the tiny allocator, whose objects may never be finalized
	var arm func()
	arm = func() {
		runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return
			}
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				if p := percentFor(sample[0].Value.Uint64()); p != current {
					current = p
					debug.SetGCPercent(p)
				}
			}
			arm()
		})
	}
	arm()
	return func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
}
