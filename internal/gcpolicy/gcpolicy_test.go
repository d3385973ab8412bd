package gcpolicy

import (
	"runtime/debug"
	"testing"
)

// current reads the runtime's setting without changing it.
func current() int {
	v := debug.SetGCPercent(100)
	debug.SetGCPercent(v)
	return v
}

func TestApplySetsPercentAndRestores(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(120))
	restore := Apply()
	if got := current(); got != Percent {
		t.Fatalf("after Apply the runtime has %d, want %d", got, Percent)
	}
	restore()
	if got := current(); got != 120 {
		t.Fatalf("after restore the runtime has %d, want the 120 it had", got)
	}
}

func TestApplyLeavesGOGCAlone(t *testing.T) {
	t.Setenv("GOGC", "150")
	defer debug.SetGCPercent(debug.SetGCPercent(150)) // as the runtime read it from GOGC
	restore := Apply()
	if got := current(); got != 150 {
		t.Fatalf("the runtime has %d, want GOGC's 150", got)
	}
	restore()
	if got := current(); got != 150 {
		t.Fatalf("after restore the runtime has %d, want 150", got)
	}
}
