package unixfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/unixfs"
)

// readAll reads the UnixFS file c in full.
func readAll(t *testing.T, st cas.BlockReader, c string) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := unixfs.ReadFile(context.Background(), st, mustCID(t, c), &buf, nil)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", c, err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("ReadFile(%s) says %d bytes, wrote %d", c, n, buf.Len())
	}
	return buf.Bytes()
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A directory kubo made (CIDv1, raw leaves, a 1026-byte file cut in
// 256-byte chunks) reads back to the files its recipe wrote.
func TestKuboDirWithFiles(t *testing.T) {
	st, roots := loadCAR(t, "dir-with-files.car")
	ctx := context.Background()
	root, err := unixfs.Load(ctx, st, roots[0])
	if err != nil {
		t.Fatal(err)
	}
	ents, err := unixfs.Entries(ctx, st, root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if want := []string{"ascii-copy.txt", "ascii.txt", "hello.txt", "multiblock.txt"}; !slices.Equal(names, want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	e, err := unixfs.Lookup(ctx, st, root, "multiblock.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := readAll(t, st, e.CID.String()), testdata(t, "multiblock.txt"); !bytes.Equal(got, want) {
		t.Errorf("multiblock.txt: %d bytes differ from the recipe's %d", len(got), len(want))
	}
	info, err := unixfs.Stat(ctx, st, e.CID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != "unixfs/file" || info.Size != 1026 || info.Links != 5 {
		t.Errorf("stat multiblock.txt: %+v, want a unixfs/file of 1026 bytes and 5 links", info)
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := unixfs.WriteTree(ctx, st, roots[0], dst, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"hello.txt":      "hello world\n",
		"ascii.txt":      "hello application/vnd.ipld.car\n",
		"ascii-copy.txt": "hello application/vnd.ipld.car\n",
		"multiblock.txt": string(testdata(t, "multiblock.txt")),
	} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	info, err = unixfs.Stat(ctx, st, roots[0])
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != "unixfs/directory" || info.Entries != 4 || info.Size != 12+31+31+1026 {
		t.Errorf("stat of the directory: %+v", info)
	}
}

// Files of dag-pb leaves (CIDv0, kubo's default) read back, and 'ipfs
// dag get' and hg show their root alike.
func TestKuboDagPBLeaves(t *testing.T) {
	st, roots := loadCAR(t, "issue-54.car")
	dst := filepath.Join(t.TempDir(), "out")
	if err := unixfs.WriteTree(context.Background(), st, roots[0], dst, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"sub1/hello.txt": "abc123\n", "sub2/hello.txt": "xyz456\n"} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	hello := "QmZgfvZtoFdbJy4JmpPHc1NCXyA7Snim2L8e6zKspiUzhu"
	data, err := st.Get(context.Background(), mustCID(t, hello))
	if err != nil {
		t.Fatal(err)
	}
	assertKuboJSON(t, data, testdata(t, "issue-54-hello.json"))
}

// The DAG-JSON of a dag-pb block is what kubo's 'ipfs dag get' prints.
func TestKuboDagJSON(t *testing.T) {
	st, roots := loadCAR(t, "dag-pb.car")
	data, err := st.Get(context.Background(), roots[0])
	if err != nil {
		t.Fatal(err)
	}
	assertKuboJSON(t, data, testdata(t, "dag-pb.json"))
}

// assertKuboJSON compares the DAG-JSON hg makes of the dag-pb block data
// with kubo's output (indented or not).
func assertKuboJSON(t *testing.T, data, kubo []byte) {
	t.Helper()
	n, err := unixfs.DecodePBNode(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cas.EncodeJSON(n.Value())
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(strings.Fields(string(kubo)), "")
	if string(got) != want {
		t.Errorf("DAG-JSON\n got %s\nwant %s", got, want)
	}
	if !bytes.Equal(n.Encode(), data) {
		t.Error("the block does not encode back to its bytes")
	}
}

// A kubo symlink inside the tree is written as a symlink.
func TestKuboSymlink(t *testing.T) {
	st, roots := loadCAR(t, "symlink.car")
	dst := filepath.Join(t.TempDir(), "out")
	if err := unixfs.WriteTree(context.Background(), st, roots[0], dst, nil); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dst, "bar")); err != nil || target != "foo" {
		t.Errorf("bar -> %q, %v; want foo", target, err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "foo")); err != nil || string(got) != "content\n" {
		t.Errorf("foo = %q, %v", got, err)
	}
}

// kubo's path-traversal fixtures, directories with entries named
// "../file" and "../foo", are refused, and nothing is written.
func TestKuboTraversalNames(t *testing.T) {
	for _, name := range []string{"inside-root.car", "outside-root.car"} {
		t.Run(name, func(t *testing.T) {
			st, roots := loadCAR(t, name)
			dir := t.TempDir()
			dst := filepath.Join(dir, "out")
			err := unixfs.WriteTree(context.Background(), st, roots[0], dst, nil)
			if !errors.Is(err, cas.ErrInvalid) || !strings.Contains(err.Error(), `"../`) {
				t.Fatalf("WriteTree = %v, want an error naming the ../ entry", err)
			}
			assertEmptyDir(t, dir)
		})
	}
}

// assertEmptyDir fails unless dir holds nothing at all: no output, no
// temporary directory left behind.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("%s holds %d entries after a refusal (first %s)", dir, len(ents), ents[0].Name())
	}
}

// A HAMT-sharded directory kubo made: 1000 entries, every one in the
// bucket its murmur3 hash selects (Entries checks), each the same
// multi-block file.
func TestKuboHAMT(t *testing.T) {
	st, roots := loadCAR(t, "single-layer-hamt-with-multi-block-files.car")
	ctx := context.Background()
	root, err := unixfs.Load(ctx, st, roots[0])
	if err != nil {
		t.Fatal(err)
	}
	if root.Type() != unixfs.TypeHAMTShard || root.FS.Fanout != 256 {
		t.Fatalf("root is a %s of fanout %d, want a hamt-shard of 256", root.Type(), root.FS.Fanout)
	}
	ents, err := unixfs.Entries(ctx, st, root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	var want []string
	for i := 1; i <= 1000; i++ {
		want = append(want, fmt.Sprintf("%d.txt", i))
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("%d entries, want 1.txt .. 1000.txt", len(names))
	}
	e, err := unixfs.Lookup(ctx, st, root, "577.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, st, e.CID.String()); !bytes.Equal(got, testdata(t, "multiblock.txt")) {
		t.Error("577.txt differs from the multi-block text")
	}
	dst := filepath.Join(t.TempDir(), "out")
	if err := unixfs.WriteTree(ctx, st, roots[0], dst, nil); err != nil {
		t.Fatal(err)
	}
	written, _ := os.ReadDir(dst)
	if len(written) != 1000 {
		t.Errorf("wrote %d files, want 1000", len(written))
	}
	info, err := unixfs.Stat(ctx, st, roots[0])
	if err != nil {
		t.Fatal(err)
	}
	if info.Entries != 1000 || info.Size != 1000*1026 {
		t.Errorf("stat: %d entries of %d bytes, want 1000 of %d", info.Entries, info.Size, 1000*1026)
	}
}

// A file whose middle block is missing: the error names the block, and
// WriteTree of a directory holding it leaves nothing behind.
func TestKuboMissingBlock(t *testing.T) {
	st, roots := loadCAR(t, "file-3k-and-3-blocks-missing-block.car")
	ctx := context.Background()
	var buf bytes.Buffer
	_, err := unixfs.ReadFile(ctx, st, roots[0], &buf, nil)
	const missing = "QmSNLTo6Wv9dfroVaw7MFYjLqf9ho7PKrgsjdzYDtv8h1W"
	if !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("ReadFile = %v, want not found naming %s", err, missing)
	}
	// Wrapped in a directory of our own, the same file writes nothing.
	d := &dag{t: t, st: st}
	top := d.dir(ent("a.txt", d.raw("fine")), ent("big.bin", roots[0]))
	dir := t.TempDir()
	err = unixfs.WriteTree(ctx, st, top, filepath.Join(dir, "out"), nil)
	if !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("WriteTree = %v, want not found naming %s", err, missing)
	}
	assertEmptyDir(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "out")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("out exists after a failed write: %v", err)
	}
}

// A subdirectory of single- and multi-block files.
func TestKuboSubdirMixed(t *testing.T) {
	st, roots := loadCAR(t, "subdir-with-mixed-block-files.car")
	dst := filepath.Join(t.TempDir(), "out")
	if err := unixfs.WriteTree(context.Background(), st, roots[0], dst, nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"subdir/hello.txt":      "hello world\n",
		"subdir/ascii.txt":      "hello application/vnd.ipld.car\n",
		"subdir/multiblock.txt": string(testdata(t, "multiblock.txt")),
	} {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(dst, "subdir")); len(ents) != 3 {
		t.Errorf("subdir holds %d entries, want 3", len(ents))
	}
}
