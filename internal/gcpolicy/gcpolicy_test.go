package gcpolicy

import (
	"runtime/debug"
	"testing"
)

func TestApplySetsPercent(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	if got := Apply(); got != Percent {
		t.Fatalf("Apply() = %d, want %d", got, Percent)
	}
	if got := debug.SetGCPercent(Percent); got != Percent {
		t.Fatalf("the runtime has %d, want %d", got, Percent)
	}
}

func TestApplyLeavesGOGCAlone(t *testing.T) {
	t.Setenv("GOGC", "150")
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	debug.SetGCPercent(150) // as the runtime read it from GOGC at start
	if got := Apply(); got != 150 {
		t.Fatalf("Apply() = %d, want GOGC's 150", got)
	}
	if got := debug.SetGCPercent(150); got != 150 {
		t.Fatalf("the runtime has %d, want 150", got)
	}
}
