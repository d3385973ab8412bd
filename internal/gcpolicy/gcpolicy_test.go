package gcpolicy

import (
	"math"
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
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(120))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	restore := Apply()
	if got := current(); got != Percent {
		t.Fatalf("after Apply the runtime has %d, want %d", got, Percent)
	}
	if mem := physicalMemory(); mem > 0 {
		if got := debug.SetMemoryLimit(-1); got != int64(mem/2) {
			t.Fatalf("memory limit %d, want half of %d", got, mem)
		}
	}
	restore()
	if got := current(); got != 120 {
		t.Fatalf("after restore the runtime has %d, want the 120 it had", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("after restore the memory limit is %d, want none", got)
	}
}

func TestApplyLeavesGOMEMLIMITAlone(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 30)) // as the runtime read it
	restore := Apply()
	defer restore()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("memory limit %d, want GOMEMLIMIT's %d", got, 1<<30)
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
