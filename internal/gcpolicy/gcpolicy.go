// Package gcpolicy sets how often a scheduling hg process collects
// garbage.
//
// A scheduler keeps little per node and allocates quickly: every node it
// runs encodes, hashes, signs and decodes some 60 KB of objects that die at
// once, while what it keeps (the plan, the run record, the outputs of done
// nodes) grows by a few kilobytes a node. With Go's default (GOGC=100) the
// collector ran every few megabytes, and its marking took a fifth of a
// run's CPU. Percent collects a quarter as often, for a heap at most five
// times the live data. hg run, hg resume and hg worker apply it; commands
// whose live data is the user's (hg verify --bundle holds a bundle in
// memory) keep Go's default.
package gcpolicy

import (
	"math"
	"os"
	"runtime/debug"
)

// Percent is the scheduler's garbage collection target (see
// [debug.SetGCPercent]).
const Percent = 400

// Apply sets [Percent] unless GOGC is set in the environment, which wins,
// as it does for any Go program. So that a heap five times the live data
// never crowds out the machine, it also sets a soft memory limit of half
// the physical memory (where that is known) unless GOMEMLIMIT is set: near
// the limit the collector runs as often as it must. It returns a function
// that restores the settings it found.
func Apply() (restore func()) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		return func() {}
	}
	old := debug.SetGCPercent(Percent)
	oldLimit := int64(-1) // unchanged
	if v, ok := os.LookupEnv("GOMEMLIMIT"); !ok || v == "" {
		if mem := physicalMemory(); mem > 0 {
			oldLimit = debug.SetMemoryLimit(int64(min(mem/2, math.MaxInt64)))
		}
	}
	return func() {
		debug.SetGCPercent(old)
		if oldLimit >= 0 {
			debug.SetMemoryLimit(oldLimit)
		}
	}
}
