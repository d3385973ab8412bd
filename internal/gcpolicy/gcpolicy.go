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
	"os"
	"runtime/debug"
)

// Percent is the scheduler's garbage collection target (see
// [debug.SetGCPercent]).
const Percent = 400

// Apply sets [Percent] unless GOGC is set in the environment, which wins,
// as it does for any Go program. It returns a function that restores the
// setting it found.
func Apply() (restore func()) {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		return func() {}
	}
	old := debug.SetGCPercent(Percent)
	return func() { debug.SetGCPercent(old) }
}
