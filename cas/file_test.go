package cas_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestFileRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{0, 1, 1000, cas.ChunkSize - 1, cas.ChunkSize, cas.ChunkSize + 1, 3*cas.ChunkSize + 17} {
		st := memstore.New()
		data := randomBytes(size, uint64(size))
		c, n, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
		if err != nil {
			t.Fatalf("size %d: put: %v", size, err)
		}
		if n != uint64(size) {
			t.Fatalf("size %d: put reported %d bytes", size, n)
		}
		var out bytes.Buffer
		got, err := cas.ReadFile(ctx, st, c, &out, nil)
		if err != nil {
			t.Fatalf("size %d: read: %v", size, err)
		}
		if got != int64(size) || !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("size %d: read back %d bytes, differ=%v", size, got, !bytes.Equal(out.Bytes(), data))
		}
		// One raw block per chunk plus one index node.
		wantBlocks := (size+cas.ChunkSize-1)/cas.ChunkSize + 1
		if got := countBlocks(t, st); got != wantBlocks {
			t.Fatalf("size %d: %d blocks stored, want %d", size, got, wantBlocks)
		}
		// Same content, same CID.
		c2, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
		if err != nil || c2 != c {
			t.Fatalf("size %d: second put gave %v, %v; want %v", size, c2, err, c)
		}
	}
}

func countBlocks(t *testing.T, st cas.Store) int {
	t.Helper()
	n := 0
	if err := st.AllKeys(context.Background(), func(cid.Cid, int) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// failReader fails after handing out some bytes.
type failReader struct{ left int }

func (r *failReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, errors.New("disk on fire")
	}
	n := min(len(p), r.left)
	r.left -= n
	return n, nil
}

func TestPutFileReadError(t *testing.T) {
	st := memstore.New()
	_, _, err := cas.PutFile(context.Background(), st, &failReader{left: 3*cas.ChunkSize + 5}, nil)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk on fire")) {
		t.Fatalf("got %v, want the read error", err)
	}
}

func TestReadFileCorruptChunk(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewCorruptible(memstore.New())
	data := randomBytes(2*cas.ChunkSize+10, 7)
	c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	second := cas.NewBlock(cas.Raw, data[cas.ChunkSize:2*cas.ChunkSize]).CID()
	bad := bytes.Clone(data[cas.ChunkSize : 2*cas.ChunkSize])
	bad[100] ^= 1
	if !st.Corrupt(second, bad) {
		t.Fatal("chunk not stored")
	}
	_, err = cas.ReadFile(ctx, st, c, io.Discard, nil)
	var ce *cas.CorruptError
	if !errors.As(err, &ce) || ce.CID != second {
		t.Fatalf("got %v, want a CorruptError for %s", err, second)
	}
}

func stringsReader(s string) io.Reader { return bytes.NewReader([]byte(s)) }

// slowStore takes its time over every Put, as a disk does, so that a
// shared writer's batch is still in flight when PutFile returns.
type slowStore struct{ *memstore.Store }

func (s slowStore) Put(ctx context.Context, blocks ...cas.Block) error {
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.Put(ctx, blocks...)
}

// TestPutFileSharedWriter puts several files through one writer, as
// PutTree does, with batches smaller than a file: a batch a PutFile
// started must still be stored after that PutFile returned.
func TestPutFileSharedWriter(t *testing.T) {
	ctx := context.Background()
	st := slowStore{memstore.New()}
	w := cas.NewWriter(st)
	w.MaxBytes = cas.ChunkSize
	var roots []cid.Cid
	var files [][]byte
	for i := range 3 {
		data := randomBytes(2*cas.ChunkSize+100, uint64(100+i))
		c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), &cas.PutOptions{Writer: w})
		if err != nil {
			t.Fatalf("file %d: %v", i, err)
		}
		roots, files = append(roots, c), append(files, data)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	for i, c := range roots {
		var got bytes.Buffer
		if _, err := cas.ReadFile(ctx, st, c, &got, nil); err != nil || !bytes.Equal(got.Bytes(), files[i]) {
			t.Errorf("file %d reads back %d bytes, %v", i, got.Len(), err)
		}
	}
}
