package cas

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/ipfs/go-cid"
)

// mapStore is the least store the internal tests need; the real ones
// live in subpackages, which import this one.
type mapStore struct {
	Store // unimplemented methods panic
	m     map[cid.Cid][]byte
}

func newMapStore() *mapStore { return &mapStore{m: map[cid.Cid][]byte{}} }

func (s *mapStore) Put(_ context.Context, blocks ...Block) error {
	for _, b := range blocks {
		s.m[b.CID()] = append([]byte(nil), b.Data()...)
	}
	return nil
}

func (s *mapStore) View(_ context.Context, c cid.Cid, fn func([]byte) error) error {
	d, ok := s.m[c]
	if !ok {
		return &NotFoundError{CID: c}
	}
	if err := Verify(c, d); err != nil {
		return err
	}
	return fn(d)
}

// buildFile stores a file of n one-byte chunks through the index builder,
// so that indexes of several levels can be tested without gigabytes.
func buildFile(t *testing.T, st Store, n int) ([]byte, Link) {
	t.Helper()
	ctx := context.Background()
	w := NewWriter(st)
	b := fileIndexBuilder{add: func(blk Block) error { return w.Add(ctx, blk) }}
	var content []byte
	for i := range n {
		chunk := []byte{byte(i)}
		blk := NewBlock(Raw, chunk)
		if err := w.Add(ctx, blk); err != nil {
			t.Fatal(err)
		}
		if err := b.addLeaf(Link{blk.CID()}, 1); err != nil {
			t.Fatal(err)
		}
		content = append(content, chunk...)
	}
	root, err := b.finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return content, Link{root}
}

func TestFileIndexLevels(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		chunks     int
		wantHeight uint64
		wantLinks  int
	}{
		{0, 0, 0},
		{1, 0, 1},
		{FanOut, 0, FanOut},
		{FanOut + 1, 1, 2},
		{2*FanOut + 1, 1, 3},
	} {
		st := newMapStore()
		content, root := buildFile(t, st, tc.chunks)
		n, err := LoadFileNode(ctx, st, root.Cid)
		if err != nil {
			t.Fatal(err)
		}
		if n.Height != tc.wantHeight || len(n.Links) != tc.wantLinks || n.Size != uint64(tc.chunks) {
			t.Errorf("%d chunks: root height %d with %d links and size %d; want height %d, %d links, size %d",
				tc.chunks, n.Height, len(n.Links), n.Size, tc.wantHeight, tc.wantLinks, tc.chunks)
		}
		var out bytes.Buffer
		if _, err := ReadFile(ctx, st, root.Cid, &out, nil); err != nil {
			t.Fatalf("%d chunks: %v", tc.chunks, err)
		}
		if !bytes.Equal(out.Bytes(), content) {
			t.Fatalf("%d chunks: content differs", tc.chunks)
		}
	}
}

// A node that lies about its size is refused, even though every block
// hashes correctly.
func TestReadFileSizeLie(t *testing.T) {
	ctx := context.Background()
	st := newMapStore()
	chunk := NewBlock(Raw, []byte("hello"))
	for _, size := range []uint64{4, 6} {
		data, err := Marshal(&FileNode{Type: TypeFile, Size: size, Links: []Link{{chunk.CID()}}})
		if err != nil {
			t.Fatal(err)
		}
		node := NewBlock(DagCBOR, data)
		if err := st.Put(ctx, chunk, node); err != nil {
			t.Fatal(err)
		}
		_, err = ReadFile(ctx, st, node.CID(), &bytes.Buffer{}, nil)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("size %d: got %v, want ErrInvalid", size, err)
		}
	}
}
