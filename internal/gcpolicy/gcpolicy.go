// Package gcpolicy sets how often the hg process collects garbage.
//
// hg keeps little and allocates quickly: a scheduler's live heap is a few
// megabytes while every node it runs encodes, hashes, signs and decodes
// some 60 KB of objects that die at once. With Go's default (GOGC=100) the
// collector then runs every few megabytes, and its marking took a fifth of
// a run's CPU. Percent collects a quarter as often, for a heap at most five
// times the live data: tens of megabytes for a run of 10,000 nodes.
package gcpolicy

import (
	"os"
	"runtime/debug"
)

// Percent is hg's garbage collection target (see [debug.SetGCPercent]).
const Percent = 400

// Apply sets [Percent] unless GOGC is set in the environment, which wins,
// as it does for any Go program. It returns the setting in force.
func Apply() int {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		// Read the setting the runtime took from GOGC, and put it back.
		old := debug.SetGCPercent(100)
		debug.SetGCPercent(old)
		return old
	}
	debug.SetGCPercent(Percent)
	return Percent
}
