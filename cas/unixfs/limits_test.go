package unixfs_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/unixfs"
)

// A directory holding a store's directory name, in any case, is not
// written out: hg run below it would take it for its store, with the
// keys and trust list the DAG's author put there.
func TestStoreNameRefused(t *testing.T) {
	for _, name := range []string{".haygent", ".HayGent"} {
		t.Run(name, func(t *testing.T) {
			d := newDAG(t)
			store := d.dir(ent("keys", d.dir(ent("runner.key", d.raw("hg ed25519 seed AAAA")))))
			root := d.dir(ent("README", d.raw("hi")), ent("project", d.dir(ent(name, store))))
			assertRefused(t, d, root, cas.ErrInvalid, "project/"+name)
		})
	}
}

// A symlink's target is at most PATH_MAX less one byte: one of 4 MiB
// linked from many entries cost its length for each of them.
func TestLongSymlinkTargetRefused(t *testing.T) {
	d := newDAG(t)
	long := d.symlink(strings.Repeat("a", unixfs.MaxSymlinkTarget+1))
	root := d.dir(ent("l1", long), ent("l2", long))
	assertRefused(t, d, root, cas.ErrInvalid, "symlink target of 4096 bytes")
	if _, err := unixfs.Load(context.Background(), d.st, long); err == nil {
		t.Fatal("Load of a symlink with a 4096-byte target: no error")
	}
	ok := d.dir(ent("f", d.raw("x")), ent("l", d.symlink(strings.Repeat("./", 100)+"f")))
	if err := unixfs.WriteTree(context.Background(), d.st, ok, filepath.Join(t.TempDir(), "out"), nil); err != nil {
		t.Fatalf("a symlink of 201 bytes: %v", err)
	}
}

// A few blocks can name a directory under 2^N paths (each level links the
// one below twice); what is written is counted along every path and
// refused past MaxEntries, leaving nothing.
func TestExpansionBounded(t *testing.T) {
	d := newDAG(t)
	level := d.dir(ent("f", d.raw("")))
	for range 9 { // 3*2^9 - 2 = 1534 entries below the root, in 11 blocks
		level = d.dir(ent("a", level), ent("b", level))
	}
	dir := t.TempDir()
	err := unixfs.WriteTree(context.Background(), d.st, level, filepath.Join(dir, "out"), &unixfs.WriteOptions{MaxEntries: 1000})
	if err == nil || !strings.Contains(err.Error(), "more than 1000 entries") {
		t.Fatalf("WriteTree = %v, want refused past 1000 entries", err)
	}
	assertEmptyDir(t, dir)
	if err := unixfs.WriteTree(context.Background(), d.st, level, filepath.Join(t.TempDir(), "out"), &unixfs.WriteOptions{MaxEntries: 1534}); err != nil {
		t.Fatalf("within the bound: %v", err)
	}
}

// A path below the output longer than PATH_MAX is refused, however few
// levels make it.
func TestLongPathRefused(t *testing.T) {
	d := newDAG(t)
	name := strings.Repeat("n", 255)
	level := d.dir(ent("f", d.raw("x")))
	for range 17 { // 17 * 256 bytes > 4096
		level = d.dir(ent(name, level))
	}
	assertRefused(t, d, level, cas.ErrInvalid, "over 4096")
}
