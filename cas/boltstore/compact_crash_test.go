package boltstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
)

// Packs and compaction steps are small in the crash trials, so that one
// gc has many steps to be killed in.
const (
	crashPackMax      = 1 << 20
	crashCompactBatch = 300 << 10
)

// compactChild runs gc on the store in dir, printing "start" first; with
// killAt set, it sends itself SIGKILL at that point of the compaction
// (see compactHook), and says "passed" if it ends without getting there.
func compactChild(dir, killAt string) error {
	packMax, compactBatch = crashPackMax, crashCompactBatch
	if killAt != "" {
		compactHook = func(point string) {
			if point == killAt {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
		}
	}
	s, err := Open(dir, &Options{Command: "hg gc (crash child)", Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Println("start")
	if _, err := cas.GC(context.Background(), s, &cas.GCOptions{Compact: &cas.CompactOptions{}}); err != nil {
		return err
	}
	fmt.Println("passed")
	return nil
}

// crashFixture makes a store of mostly dead packs (compactFixture) in a
// new directory and closes it.
func crashFixture(t *testing.T) (dir string, pinned []cas.Block, live int64) {
	t.Helper()
	s, dir := newStore(t)
	pinned, live = compactFixture(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, pinned, live
}

// afterCrash opens the store a killed gc left, as the next command would,
// and checks that no pinned block is lost and that the store checks
// clean; then that the next gc gives the space back.
func afterCrash(t *testing.T, dir string, pinned []cas.Block, live int64) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("open after the kill: %v", err)
	}
	defer s.Close()
	getsBack(t, s, pinned)
	rep, err := cas.Fsck(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("fsck after the kill: %+v", rep)
	}
	if _, err := cas.GC(ctx, s, &cas.GCOptions{Compact: &cas.CompactOptions{}}); err != nil {
		t.Fatalf("the next gc: %v", err)
	}
	getsBack(t, s, pinned)
	checkClean(t, s)
	if got := packedSize(t, dir); got > live+int64(len(packFiles(t, dir)))*directAlign {
		t.Errorf("after the next gc the packs hold %d bytes for %d live", got, live)
	}
}

// gc killed with SIGKILL at each point of a compaction (copies written,
// index switched, old packs partly removed) and at random moments loses
// no block; the store opens, checks clean, and the next gc gives the
// space back.
func TestCompactCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	setPackMax(t, crashPackMax)
	for _, point := range []string{"copied", "switched", "removed"} {
		t.Run(point, func(t *testing.T) {
			dir, pinned, live := crashFixture(t)
			p := startChild(t, "compact", dir, envKillAt+"="+point)
			if line := p.next(t); line != "start" {
				t.Fatalf("child said %q", line)
			}
			rest := p.wait(t)
			if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child ended with %v (said %q), want killed at %q; stderr %s", p.cmd.ProcessState, rest, point, p.stderr.String())
			}
			afterCrash(t, dir, pinned, live)
		})
	}
	for i := range 5 {
		t.Run(fmt.Sprint("random", i), func(t *testing.T) {
			dir, pinned, live := crashFixture(t)
			p := startChild(t, "compact", dir)
			if line := p.next(t); line != "start" {
				t.Fatalf("child said %q", line)
			}
			time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
			rest := p.kill()
			t.Logf("killed; the child said %q after start, left %d pack files", rest, len(packFiles(t, dir)))
			afterCrash(t, dir, pinned, live)
		})
	}
}
