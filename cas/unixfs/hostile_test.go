package unixfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/storetest"
	"github.com/haygent/hg/cas/unixfs"
	"github.com/ipfs/go-cid"
)

// Entry names that could write outside the output directory, or twice
// to one file, are refused before anything is written.
func TestHostileNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "../x", "a/b", "/etc", `a\b`, "a\x00b", "\xff"} {
		t.Run(name, func(t *testing.T) {
			d := newDAG(t)
			root := d.dir(ent("ok.txt", d.raw("ok")), ent(name, d.raw("evil")))
			want := cas.ErrInvalid
			if name == "\xff" { // dag-pb names are UTF-8: the block is malformed
				want = unixfs.ErrMalformed
			}
			assertRefused(t, d, root, want, "")
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		d := newDAG(t)
		root := d.dir(ent("x", d.raw("one")), ent("x", d.raw("two")))
		assertRefused(t, d, root, cas.ErrInvalid, `"x" appears twice`)
	})
	t.Run("duplicate across HAMT shards", func(t *testing.T) {
		// The same name twice in one shard; Entries sees the whole
		// directory, so where the copies sit does not matter.
		d := newDAG(t)
		f := d.raw("x")
		root := d.hamt(256, hamtEnt{"dup", f}, hamtEnt{"dup", f})
		assertRefused(t, d, root, cas.ErrInvalid, "")
	})
}

// assertRefused checks that WriteTree of root fails with an error
// wrapping want (and holding msg), leaving the parent directory empty.
func assertRefused(t *testing.T, d *dag, root cid.Cid, want error, msg string) {
	t.Helper()
	assertRefusedIn(t, d.st, root, want, msg)
}

func assertRefusedIn(t *testing.T, st cas.BlockReader, root cid.Cid, want error, msg string) {
	t.Helper()
	dir := t.TempDir()
	err := unixfs.WriteTree(context.Background(), st, root, filepath.Join(dir, "out"), nil)
	if !errors.Is(err, want) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("WriteTree = %v, want %v holding %q", err, want, msg)
	}
	assertEmptyDir(t, dir)
}

// Sizes a DAG declares must match the bytes it holds: no file is cut
// short or padded to fit a lying index.
func TestHostileSizes(t *testing.T) {
	ctx := context.Background()
	read := func(d *dag, c cid.Cid) ([]byte, error) {
		var buf bytes.Buffer
		_, err := unixfs.ReadFile(ctx, d.st, c, &buf, nil)
		return buf.Bytes(), err
	}
	t.Run("honest", func(t *testing.T) {
		d := newDAG(t)
		inner := d.file("", sized{d.raw("ab"), 2}, sized{d.raw("cde"), 3})
		root := d.file("<", sized{inner, 5}, sized{d.raw(">"), 1})
		if got, err := read(d, root); err != nil || string(got) != "<abcde>" {
			t.Fatalf("ReadFile = %q, %v", got, err)
		}
	})
	t.Run("leaf longer than declared", func(t *testing.T) {
		d := newDAG(t)
		root := d.file("", sized{d.raw("abc"), 2})
		if _, err := read(d, root); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("ReadFile = %v, want invalid", err)
		}
	})
	t.Run("leaf shorter than declared", func(t *testing.T) {
		d := newDAG(t)
		root := d.file("", sized{d.raw("a"), 1 << 40})
		if _, err := read(d, root); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("ReadFile = %v, want invalid", err)
		}
	})
	t.Run("filesize disagrees with blocksizes", func(t *testing.T) {
		d := newDAG(t)
		leaf := d.raw("abc")
		root := d.node(&unixfs.Data{Type: unixfs.TypeFile, Filesize: 99, HasFilesize: true, Blocksizes: []uint64{3}},
			unixfs.PBLink{Hash: leaf})
		if _, err := read(d, root); !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "filesize 99") {
			t.Fatalf("ReadFile = %v, want invalid naming filesize 99", err)
		}
	})
	t.Run("blocksizes overflow", func(t *testing.T) {
		d := newDAG(t)
		leaf := d.raw("a")
		root := d.node(&unixfs.Data{Type: unixfs.TypeFile, Blocksizes: []uint64{1 << 63, 1 << 63}},
			unixfs.PBLink{Hash: leaf}, unixfs.PBLink{Hash: leaf})
		if _, err := read(d, root); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("ReadFile = %v, want invalid", err)
		}
	})
	t.Run("more links than blocksizes", func(t *testing.T) {
		d := newDAG(t)
		leaf := d.raw("a")
		root := d.node(&unixfs.Data{Type: unixfs.TypeFile, Blocksizes: []uint64{1}},
			unixfs.PBLink{Hash: leaf}, unixfs.PBLink{Hash: leaf})
		if _, err := read(d, root); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("ReadFile = %v, want invalid", err)
		}
	})
	t.Run("directory inside a file", func(t *testing.T) {
		d := newDAG(t)
		sub := d.dir()
		root := d.file("", sized{sub, 0})
		if _, err := read(d, root); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("ReadFile = %v, want invalid", err)
		}
	})
	t.Run("too deep", func(t *testing.T) {
		d := newDAG(t)
		c := d.raw("x")
		for range unixfs.MaxFileDepth + 1 {
			c = d.file("", sized{c, 1})
		}
		if _, err := read(d, c); !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), "deeper") {
			t.Fatalf("ReadFile = %v, want invalid: too deep", err)
		}
	})
	t.Run("wide fan-out of one block is fine and exact", func(t *testing.T) {
		// Content addressing lets one block stand for many: the file is
		// as long as it says, no more.
		d := newDAG(t)
		leaf := d.raw("0123456789")
		var kids []sized
		for range 1000 {
			kids = append(kids, sized{leaf, 10})
		}
		root := d.file("", kids...)
		got, err := read(d, root)
		if err != nil || len(got) != 10000 {
			t.Fatalf("ReadFile = %d bytes, %v", len(got), err)
		}
	})
	t.Run("a lying file in a tree writes nothing", func(t *testing.T) {
		d := newDAG(t)
		bad := d.file("", sized{d.raw("abc"), 2})
		root := d.dir(ent("a.txt", d.raw("fine")), ent("b.txt", bad))
		assertRefused(t, d, root, cas.ErrInvalid, "b.txt")
	})
}

// A damaged block is found by the store's hash check and stops the walk
// with ErrCorrupt.
func TestHostileCorruptBlock(t *testing.T) {
	d := newDAG(t)
	leaf := d.raw("honest bytes")
	root := d.dir(ent("f", d.file("", sized{leaf, 12})))
	// Swap the leaf's bytes behind the store's back, as a damaged disk
	// would.
	st := storetest.NewCorruptible(d.st)
	st.Corrupt(leaf, []byte("forged bytes"))
	assertRefusedIn(t, st, root, cas.ErrCorrupt, leaf.String())
}

// Symlinks are written only when their target stays inside the tree.
func TestSafeSymlinkTarget(t *testing.T) {
	for _, tt := range []struct {
		rel, target string
		ok          bool
	}{
		{"l", "foo", true},
		{"l", "./foo/bar", true},
		{"a/l", "../foo", true},
		{"a/b/l", "../../foo/x", true},
		{"l", "../foo", false},
		{"a/l", "../../foo", false},
		{"l", "/etc/passwd", false},
		{"l", "", false},
		{"l", "a/../..", false},
		{"l", "q/..", false}, // q may be a link to "."
		{"a/l", "x/../../y", false},
		{"l", "a\x00b", false},
	} {
		err := unixfs.SafeSymlinkTarget(tt.rel, tt.target)
		if (err == nil) != tt.ok {
			t.Errorf("SafeSymlinkTarget(%q, %q) = %v, want ok=%v", tt.rel, tt.target, err, tt.ok)
		}
	}
}

func TestHostileSymlinks(t *testing.T) {
	for _, target := range []string{"/etc/passwd", "../../outside", "sub/../.."} {
		t.Run(target, func(t *testing.T) {
			d := newDAG(t)
			root := d.dir(ent("f", d.raw("x")), ent("sub", d.dir(ent("link", d.symlink(target)))))
			assertRefused(t, d, root, cas.ErrInvalid, "sub/link")
		})
	}
	t.Run("inside", func(t *testing.T) {
		d := newDAG(t)
		root := d.dir(ent("f", d.raw("x")), ent("sub", d.dir(ent("link", d.symlink("../f")))))
		dst := filepath.Join(t.TempDir(), "out")
		if err := unixfs.WriteTree(context.Background(), d.st, root, dst, nil); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(dst, "sub", "link")); err != nil || string(got) != "x" {
			t.Fatalf("sub/link reads %q, %v", got, err)
		}
	})
}

// Metadata nodes are not read; the error says so.
func TestUnsupportedMetadata(t *testing.T) {
	d := newDAG(t)
	meta := d.node(&unixfs.Data{Type: unixfs.TypeMetadata})
	root := d.dir(ent("m", meta))
	assertRefused(t, d, root, unixfs.ErrUnsupported, "Metadata")
}

// countingReader counts the blocks read through it.
type countingReader struct {
	cas.BlockReader
	n int
}

func (r *countingReader) View(ctx context.Context, c cid.Cid, fn func([]byte) error) error {
	r.n++
	return r.BlockReader.View(ctx, c, fn)
}

func (r *countingReader) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	r.n++
	return r.BlockReader.Get(ctx, c)
}

// DAGs that repeat one block under many names, so that a walk by path
// would visit it exponentially often, cost a visit per distinct block
// (stat), or fail at the second use (a HAMT shard in two buckets).
func TestHostileRepeats(t *testing.T) {
	ctx := context.Background()
	t.Run("directory repeated at every level", func(t *testing.T) {
		d := newDAG(t)
		c := d.dir(ent("f", d.raw("12345")))
		const levels = 30 // 2^30 paths
		for range levels {
			c = d.dir(ent("a", c), ent("b", c))
		}
		r := &countingReader{BlockReader: d.st}
		info, err := unixfs.Stat(ctx, r, c)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != 5<<levels {
			t.Errorf("size %d, want %d", info.Size, 5<<levels)
		}
		if r.n > 4*levels {
			t.Errorf("stat read %d blocks for %d distinct ones", r.n, levels+2)
		}
	})
	t.Run("HAMT shard in every bucket", func(t *testing.T) {
		d := newDAG(t)
		f := d.raw("x")
		// A sub-shard holding one entry, linked from 256 buckets of the
		// root: only one of them can be where the entry's hash leads.
		sub := d.hamtLevel(1, hamtEnt{"a", f})
		var links []unixfs.PBLink
		field := make([]byte, 32)
		for b := range 256 {
			field[31-b/8] |= 1 << (b % 8)
			links = append(links, unixfs.PBLink{Hash: sub, Name: fmt.Sprintf("%02X", b), HasName: true})
		}
		root := d.node(&unixfs.Data{Type: unixfs.TypeHAMTShard, Data: field, HashType: 0x22, HasHashType: true, Fanout: 256, HasFanout: true}, links...)
		r := &countingReader{BlockReader: d.st}
		n, err := unixfs.Load(ctx, r, root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unixfs.Entries(ctx, r, n); !errors.Is(err, cas.ErrInvalid) {
			t.Fatalf("Entries = %v, want invalid", err)
		}
		if r.n > 3 {
			t.Errorf("read %d blocks before refusing, want at most 3", r.n)
		}
	})
	t.Run("empty sub-shard", func(t *testing.T) {
		d := newDAG(t)
		empty := d.node(&unixfs.Data{Type: unixfs.TypeHAMTShard, HashType: 0x22, HasHashType: true, Fanout: 256, HasFanout: true})
		field := make([]byte, 32)
		field[31] = 1
		root := d.node(&unixfs.Data{Type: unixfs.TypeHAMTShard, Data: field, HashType: 0x22, HasHashType: true, Fanout: 256, HasFanout: true},
			unixfs.PBLink{Hash: empty, Name: "00", HasName: true})
		assertRefused(t, d, root, cas.ErrInvalid, "empty shard")
	})
}

// failAfter is a writer that fails once it has taken n bytes.
type failAfter struct {
	n   int
	got bytes.Buffer
}

func (w *failAfter) Write(p []byte) (int, error) {
	if w.got.Len()+len(p) > w.n {
		return 0, errors.New("disk full")
	}
	return w.got.Write(p)
}

// Leaves are fetched ahead on several goroutines but written in order;
// the first failure, a missing leaf or the writer's, stops the copy with
// exactly the bytes before it written.
func TestReadFileStopsInOrder(t *testing.T) {
	ctx := context.Background()
	d := newDAG(t)
	var kids []sized
	var want []byte
	for i := range 40 {
		s := strings.Repeat(string(rune('a'+i%26)), 100+i)
		kids = append(kids, sized{d.raw(s), uint64(len(s))})
		want = append(want, s...)
	}
	gone := cas.Sum(cas.Raw, []byte("never stored, 30 bytes long..."))
	withHole := append(append(append([]sized{}, kids[:25]...), sized{gone, 30}), kids[25:]...)
	t.Run("whole", func(t *testing.T) {
		var buf bytes.Buffer
		if _, err := unixfs.ReadFile(ctx, d.st, d.file("", kids...), &buf, nil); err != nil || !bytes.Equal(buf.Bytes(), want) {
			t.Fatalf("ReadFile: %d bytes, %v", buf.Len(), err)
		}
	})
	t.Run("missing leaf", func(t *testing.T) {
		var buf bytes.Buffer
		_, err := unixfs.ReadFile(ctx, d.st, d.file("", withHole...), &buf, nil)
		if !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), gone.String()) {
			t.Fatalf("ReadFile = %v, want not found naming %s", err, gone)
		}
		var before int
		for _, k := range kids[:25] {
			before += int(k.size)
		}
		if !bytes.Equal(buf.Bytes(), want[:before]) {
			t.Errorf("wrote %d bytes before the hole, want the %d before it", buf.Len(), before)
		}
	})
	t.Run("writer fails", func(t *testing.T) {
		w := &failAfter{n: 1000}
		_, err := unixfs.ReadFile(ctx, d.st, d.file("", kids...), w, nil)
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("ReadFile = %v, want the writer's error", err)
		}
		if !bytes.Equal(w.got.Bytes(), want[:w.got.Len()]) {
			t.Error("bytes written out of order")
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		var buf bytes.Buffer
		if _, err := unixfs.ReadFile(cctx, d.st, d.file("", kids...), &buf, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("ReadFile = %v, want cancelled", err)
		}
	})
}
