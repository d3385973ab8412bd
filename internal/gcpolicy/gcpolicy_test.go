package gcpolicy

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
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

func TestPercentFor(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, Percent},
		{1 << 20, Percent},
		{Headroom / 4, 400},
		{Headroom / 2, 200},
		{Headroom, 100},
		{4 * Headroom, 100},
	} {
		if got := percentFor(tc.live); got != tc.want {
			t.Errorf("percentFor(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
}

// TestApplyFollowsTheLiveHeap keeps more live data than the headroom
// allows at Percent and checks that, after a collection, the target has
// come down to Go's default; and that restore stops the adjusting.
func TestApplyFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	defer headroom.Store(headroom.Load())
	headroom.Store(1 << 20)
	restore := Apply()
	defer restore()
	if got := current(); got != Percent {
		t.Fatalf("after Apply the runtime has %d, want %d", got, Percent)
	}
	live := make([][]byte, 64)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	waitFor(t, func() bool { return current() == 100 })
	runtime.KeepAlive(live)
	restore()
	if got := current(); got != 100 {
		t.Fatalf("after restore the runtime has %d, want the 100 it had", got)
	}
	debug.SetGCPercent(150)
	runtime.GC()
	runtime.GC()
	if got := current(); got != 150 {
		t.Fatalf("after restore a collection changed the target to %d", got)
	}
}

// waitFor collects garbage until ok holds, or fails the test after a
// while: finalizers run on their own goroutine after a collection.
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for range 200 {
		runtime.GC()
		if ok() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the target is still %d", current())
}

// Overlapping calls, restored in any order, leave the settings as they
// found them, and hold Percent until the last is restored.
func TestApplyOverlapping(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(120))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	first := Apply()
	second := Apply()
	first()
	first() // a second call of one restore counts once
	if got := current(); got != Percent {
		t.Fatalf("with one Apply still held the runtime has %d, want %d", got, Percent)
	}
	second()
	if got := current(); got != 120 {
		t.Fatalf("after the last restore the runtime has %d, want the 120 it had", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("after the last restore the memory limit is %d, want none", got)
	}
}
