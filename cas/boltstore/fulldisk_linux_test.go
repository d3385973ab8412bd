package boltstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/haygent/hg/cas"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory until the
// test ends, or skips the test where it cannot (not root, no mount
// namespace rights).
func mountTmpfs(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.Itoa(size)); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (%v): run the tests as root to have this trial", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file in dir until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// freeBytes is what the file system holding dir has free.
func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// gc of a store on a full disk succeeds and gives space back, even when
// every live block lies after the dead ones (no dead tail to cut) and
// copying them needs room the disk does not have.
func TestGCOnAFullDisk(t *testing.T) {
	ctx := context.Background()
	mnt := mountTmpfs(t, 16<<20)
	dir := filepath.Join(mnt, ".haygent")
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	var garbage, pinned []cas.Block
	for i := range 80 {
		garbage = append(garbage, bigBlock(byte(i), 100<<10))
	}
	for i := range 10 {
		pinned = append(pinned, bigBlock(byte(200+i), 100<<10+i))
	}
	if err := s.Put(ctx, garbage...); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, pinned...); err != nil {
		t.Fatal(err)
	}
	for i, b := range pinned {
		if err := s.SetPin(ctx, "p"+strconv.Itoa(i), b.CID()); err != nil {
			t.Fatal(err)
		}
	}
	fill(t, mnt)
	punched := false
	compactHook = func(point string) { punched = punched || point == "punched" }
	defer func() { compactHook = nil }()
	before := freeBytes(t, mnt)
	stats, err := cas.GC(ctx, s, nil)
	if err != nil {
		t.Fatalf("gc on a full disk: %v", err)
	}
	after := freeBytes(t, mnt)
	t.Logf("free: %d bytes before gc, %d after; %+v", before, after, stats)
	if after-before < 6<<20 {
		t.Errorf("gc on a full disk freed %d bytes, want the 8 MiB of garbage back", after-before)
	}
	if stats.DiskFreedBytes < 6<<20 {
		t.Errorf("gc reports %d bytes freed on disk", stats.DiskFreedBytes)
	}
	if !punched {
		t.Error("the copy found room on a full disk: the trial did not try what it means to")
	}
	getsBack(t, s, pinned)
	checkClean(t, s)
	s = reopen(t, s, dir)
	getsBack(t, s, pinned)
	checkClean(t, s)
}
