package main

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory until the
// test ends, or skips the test where it cannot.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (%v): run the tests as root to have this trial", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
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

// writeRandom writes n pseudo-random bytes to path.
func writeRandom(t *testing.T, path string, n int, seed string) {
	t.Helper()
	buf := make([]byte, 0, n+32)
	s := sha256.Sum256([]byte(seed))
	for len(buf) < n {
		s = sha256.Sum256(s[:])
		buf = append(buf, s[:]...)
	}
	if err := os.WriteFile(path, buf[:n], 0o644); err != nil {
		t.Fatal(err)
	}
}

// A put that runs the disk out fails and leaves its committed batches
// behind; then hg gc, on a disk with no byte free, succeeds and gives the
// space back, and the pinned file, stored before, reads back whole.
func TestGCOnAFullDisk(t *testing.T) {
	hg := hgBinary(t)
	mnt := mountTmpfs(t, "40m")
	store := filepath.Join(mnt, "store")
	work := t.TempDir()
	hgRun(t, hg, work, 0, "--store", store, "init")
	keep := filepath.Join(work, "keep.bin")
	writeRandom(t, keep, 3<<20+5, "keep")
	hgRun(t, hg, work, 0, "--store", store, "put", "--pin", "keep", keep)
	big := filepath.Join(work, "big.bin")
	writeRandom(t, big, 64<<20, "big")
	_, stderr := hgRun2(t, hg, work, 1, "--store", store, "put", big)
	t.Logf("put of 64 MiB into 40: %s", stderr)
	// Whatever the put left, the disk is full now.
	f, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for chunk := make([]byte, 4096); ; {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	before := freeBytes(t, mnt)
	out := hgRun(t, hg, work, 0, "--store", store, "gc", "--json")
	after := freeBytes(t, mnt)
	var stats struct {
		Removed   int   `json:"removed_blocks"`
		DiskFreed int64 `json:"disk_freed_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &stats); err != nil {
		t.Fatalf("gc --json: %v: %s", err, out)
	}
	t.Logf("free %d bytes before gc, %d after; gc said %s", before, after, out)
	if after-before < 16<<20 {
		t.Errorf("gc freed %d bytes on disk, want most of the 36 MiB the put left", after-before)
	}
	if stats.DiskFreed < 16<<20 {
		t.Errorf("gc --json reports %d bytes freed on disk", stats.DiskFreed)
	}
	hgRun(t, hg, work, 0, "--store", store, "get", "keep", "-o", filepath.Join(work, "keep.out"))
	a, _ := os.ReadFile(keep)
	b, _ := os.ReadFile(filepath.Join(work, "keep.out"))
	if string(a) != string(b) {
		t.Error("the pinned file came back different")
	}
	hgRun(t, hg, work, 0, "--store", store, "fsck")
}
