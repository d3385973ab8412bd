package natsengine

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	"github.com/nats-io/nats.go/jetstream"
)

// stallingStore is a blocks bucket whose first stalls reads never end
// (until their context does), as a loaded server's can; later reads
// answer data.
type stallingStore struct {
	jetstream.ObjectStore
	stalls int32
	gets   atomic.Int32
	data   []byte
}

func (s *stallingStore) Get(ctx context.Context, name string, _ ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	if s.gets.Add(1) <= s.stalls {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &objectResult{Reader: bytes.NewReader(s.data), size: len(s.data)}, nil
}

type objectResult struct {
	io.Reader
	size int
}

func (r *objectResult) Close() error { return nil }
func (r *objectResult) Error() error { return nil }
func (r *objectResult) Info() (*jetstream.ObjectInfo, error) {
	return &jetstream.ObjectInfo{ObjectMeta: jetstream.ObjectMeta{}, Size: uint64(r.size)}, nil
}

// A read the server stalls is tried again, fetchTries times in all, the
// budget charged once for the block that arrives; a read that stalls
// every time fails instead of hanging.
func TestFetchStalled(t *testing.T) {
	b := cas.NewBlock(cas.Raw, []byte("a block"))
	for _, tc := range []struct {
		stalls int32
		ok     bool
	}{{0, true}, {1, true}, {fetchTries - 1, true}, {fetchTries, false}} {
		st := &stallingStore{stalls: tc.stalls, data: b.Data()}
		f := &fetcher{obs: st, o: WorkspaceOptions{Fetched: func(cid.Cid, int) {}}, cache: &blockCache{max: 1 << 20, m: map[cid.Cid]cas.Block{}}, try: 20 * time.Millisecond}
		budget := new(atomic.Int64)
		budget.Store(100)
		got, err := f.fetch(context.Background(), b.CID(), budget)
		switch {
		case tc.ok && (err != nil || !bytes.Equal(got.Data(), b.Data())):
			t.Errorf("%d stalls: %v", tc.stalls, err)
		case tc.ok && budget.Load() != 100-int64(len(b.Data())):
			t.Errorf("%d stalls: budget %d left, want %d", tc.stalls, budget.Load(), 100-len(b.Data()))
		case !tc.ok && err == nil:
			t.Errorf("%d stalls: fetched", tc.stalls)
		}
		if want := min(tc.stalls+1, fetchTries); st.gets.Load() != want {
			t.Errorf("%d stalls: %d reads, want %d", tc.stalls, st.gets.Load(), want)
		}
	}
}
