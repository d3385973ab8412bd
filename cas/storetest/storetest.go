// Package storetest is a conformance suite for implementations of
// [cas.Store]. Every store runs it from its own tests:
//
//	func TestStore(t *testing.T) {
//		storetest.RunWithOptions(t, func(t *testing.T) cas.Store {
//			return mystore.New(t.TempDir())
//		}, storetest.Options{Corrupt: corruptHook})
//	}
//
// The suite checks what the written contract of [cas.Store] promises and
// nothing more: round trips, idempotent, batched and bulk writes
// ([cas.PutPacked]), not-found and corruption errors, key order, context
// cancellation, pins (listed and looked up one by one), refs, use after
// Close, and concurrent use (run it under -race).
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Options tunes the suite for one implementation.
type Options struct {
	// Corrupt replaces the stored bytes of the block c in s with data,
	// bypassing verification, so that the suite can check that reads catch
	// it. It must fail t if it cannot. Nil skips the corruption tests.
	Corrupt func(t *testing.T, s cas.Store, c cid.Cid, data []byte)
}

// Run runs the suite without the corruption tests. open must return a new,
// empty store each time it is called; the suite closes it. open may
// register t.Cleanup functions (to remove files, say): they run after the
// suite has closed the store.
func Run(t *testing.T, open func(t *testing.T) cas.Store) {
	RunWithOptions(t, open, Options{})
}

// RunWithOptions runs the suite with opts. See [Run] for open.
func RunWithOptions(t *testing.T, open func(t *testing.T) cas.Store, opts Options) {
	s := &suite{open: open, opts: opts}
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"RoundTrip", s.testRoundTrip},
		{"GetReturnsCopy", s.testGetReturnsCopy},
		{"PutIdempotent", s.testPutIdempotent},
		{"PutMany", s.testPutMany},
		{"PutPacked", s.testPutPacked},
		{"PutOverLimit", s.testPutOverLimit},
		{"NotFound", s.testNotFound},
		{"View", s.testView},
		{"Delete", s.testDelete},
		{"AllKeys", s.testAllKeys},
		{"AllKeysStops", s.testAllKeysStops},
		{"ContextCancelled", s.testContextCancelled},
		{"AllKeysCancelled", s.testAllKeysCancelled},
		{"Pins", s.testPins},
		{"PinNames", s.testPinNames},
		{"Refs", s.testRefs},
		{"UseAfterClose", s.testUseAfterClose},
		{"Concurrent", s.testConcurrent},
		{"Corrupt", s.testCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

type suite struct {
	open func(t *testing.T) cas.Store
	opts Options
}

// store opens a fresh store and closes it when the test ends.
func (s *suite) store(t *testing.T) cas.Store {
	t.Helper()
	st := s.open(t)
	if st == nil {
		t.Fatal("open returned a nil store")
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// data returns n bytes that depend on seed only.
func data(seed string, n int) []byte {
	out := make([]byte, 0, n+sha256.Size)
	var ctr [8]byte
	for i := uint64(0); len(out) < n; i++ {
		binary.BigEndian.PutUint64(ctr[:], i)
		d := sha256.Sum256(append([]byte(seed), ctr[:]...))
		out = append(out, d[:]...)
	}
	return out[:n]
}

// chunkSize is the size of a file chunk: values this large take another
// path in some stores.
const chunkSize = 1 << 20

func rawBlock(seed string, n int) cas.Block { return cas.NewBlock(cas.Raw, data(seed, n)) }

// cborBlock returns a DAG-CBOR block: a map with a string key. The store
// neither parses nor checks it.
func cborBlock(seed string) cas.Block {
	b := []byte{0xa1, 0x61, 'k', 0x78, byte(len(seed))}
	b = append(b, seed...)
	return cas.NewBlock(cas.DagCBOR, b)
}

// v0Block returns a block named by a CIDv0, as other tools write them.
func v0Block(t *testing.T, seed string) cas.Block {
	t.Helper()
	d := data(seed, 300)
	h, err := mh.Sum(d, mh.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cas.NewBlockWithCID(cid.NewCidV0(h), d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleBlocks returns blocks of several codecs and sizes, the empty block
// and a 1 MiB chunk among them.
func sampleBlocks(t *testing.T) []cas.Block {
	return []cas.Block{
		rawBlock("small", 100),
		cas.NewBlock(cas.Raw, nil),
		rawBlock("page", 4096),
		rawBlock("odd", 70001),
		rawBlock("chunk", chunkSize),
		cborBlock("node"),
		v0Block(t, "v0"),
	}
}

func put(t *testing.T, st cas.Store, blocks ...cas.Block) {
	t.Helper()
	if err := st.Put(context.Background(), blocks...); err != nil {
		t.Fatalf("Put: %v", err)
	}
}

func has(t *testing.T, st cas.Store, c cid.Cid) bool {
	t.Helper()
	ok, err := st.Has(context.Background(), c)
	if err != nil {
		t.Fatalf("Has(%s): %v", c, err)
	}
	return ok
}

func get(t *testing.T, st cas.Store, c cid.Cid) []byte {
	t.Helper()
	d, err := st.Get(context.Background(), c)
	if err != nil {
		t.Fatalf("Get(%s): %v", c, err)
	}
	return d
}

type key struct {
	c    cid.Cid
	size int
}

func allKeys(t *testing.T, st cas.Store) []key {
	t.Helper()
	var out []key
	err := st.AllKeys(context.Background(), func(c cid.Cid, size int) error {
		out = append(out, key{c, size})
		return nil
	})
	if err != nil {
		t.Fatalf("AllKeys: %v", err)
	}
	return out
}

func (s *suite) testRoundTrip(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	blocks := sampleBlocks(t)
	for _, b := range blocks {
		if has(t, st, b.CID()) {
			t.Fatalf("Has(%s) before Put = true", b.CID())
		}
	}
	put(t, st, blocks...)
	for _, b := range blocks {
		if !has(t, st, b.CID()) {
			t.Errorf("Has(%s) after Put = false", b.CID())
		}
		if got := get(t, st, b.CID()); !bytes.Equal(got, b.Data()) {
			t.Errorf("Get(%s): %d bytes, want the %d put", b.CID(), len(got), len(b.Data()))
		}
		called := 0
		err := st.View(ctx, b.CID(), func(d []byte) error {
			called++
			if !bytes.Equal(d, b.Data()) {
				t.Errorf("View(%s): %d bytes, want the %d put", b.CID(), len(d), len(b.Data()))
			}
			return nil
		})
		if err != nil || called != 1 {
			t.Errorf("View(%s) = %v, fn called %d times; want nil, once", b.CID(), err, called)
		}
	}
	// The same bytes under another codec are another block.
	other := cas.NewBlock(cas.DagCBOR, blocks[0].Data())
	if has(t, st, other.CID()) {
		t.Errorf("Has(%s) = true: raw and DAG-CBOR blocks of the same bytes collide", other.CID())
	}
}

// testPutOverLimit: a block over cas.MaxBlockSize is refused, naming the
// limit, and the Put holding it stores nothing (it is atomic); a block of
// exactly the limit is stored. A store that kept a larger block could
// never be moved: no bundle section carries one.
func (s *suite) testPutOverLimit(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	small := rawBlock("beside the big one", 100)
	big := rawBlock("over the limit", cas.MaxBlockSize+1)
	err := st.Put(ctx, small, big)
	if !errors.Is(err, cas.ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprint(cas.MaxBlockSize)) {
		t.Fatalf("Put of a block of %d bytes = %v; want an error naming the limit of %d, wrapping ErrTooLarge", len(big.Data()), err, cas.MaxBlockSize)
	}
	if has(t, st, big.CID()) || has(t, st, small.CID()) {
		t.Fatal("a refused Put stored a block")
	}
	if a, ok := st.(cas.Adopter); ok {
		if err := a.Adopt(small, big); !errors.Is(err, cas.ErrTooLarge) {
			t.Fatalf("Adopt of a block of %d bytes = %v; want ErrTooLarge", len(big.Data()), err)
		}
		if has(t, st, big.CID()) || has(t, st, small.CID()) {
			t.Fatal("a refused Adopt stored a block")
		}
	}
	limit := rawBlock("at the limit", cas.MaxBlockSize)
	put(t, st, limit)
	if got := get(t, st, limit.CID()); len(got) != cas.MaxBlockSize {
		t.Fatalf("a block of exactly the limit came back with %d bytes", len(got))
	}
}

func (s *suite) testGetReturnsCopy(t *testing.T) {
	st := s.store(t)
	b := rawBlock("copy", 1000)
	want := bytes.Clone(b.Data())
	put(t, st, b)
	got := get(t, st, b.CID())
	for i := range got {
		got[i] ^= 0xff
	}
	if again := get(t, st, b.CID()); !bytes.Equal(again, want) {
		t.Error("modifying the slice Get returned changed the stored block")
	}
	if !bytes.Equal(b.Data(), want) {
		t.Error("Put or Get aliased the caller's slice")
	}
}

func (s *suite) testPutIdempotent(t *testing.T) {
	st := s.store(t)
	a, b := rawBlock("a", 2000), cborBlock("b")
	put(t, st, a)
	put(t, st, a)
	put(t, st, a, b, a, b)
	put(t, st, b)
	put(t, st) // no blocks at all
	keys := allKeys(t, st)
	if len(keys) != 2 {
		t.Fatalf("AllKeys after putting 2 blocks repeatedly: %d keys, want 2", len(keys))
	}
	for _, blk := range []cas.Block{a, b} {
		if got := get(t, st, blk.CID()); !bytes.Equal(got, blk.Data()) {
			t.Errorf("Get(%s) after repeated Put: wrong bytes", blk.CID())
		}
	}
}

// testPutPacked: cas.PutPacked (the store's own PutPacked, if it is a
// cas.BulkPutter) stores every block of every pack, and nothing else:
// blocks of every size, in several packs, an empty pack, a block in two
// packs and one stored before.
func (s *suite) testPutPacked(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	before := rawBlock("packed-before", 300)
	put(t, st, before)
	var blocks []cas.Block
	for i := range 600 {
		blocks = append(blocks, rawBlock(fmt.Sprint("packed-", i), 10+i*37%5000))
	}
	blocks = append(blocks, sampleBlocks(t)...)
	packs := []cas.Packed{
		cas.Pack(blocks[:100]...),
		cas.Pack(),
		cas.Pack(append(blocks[100:400:400], blocks[5], before)...),
		cas.Pack(blocks[400:]...),
	}
	if err := cas.PutPacked(ctx, st, packs...); err != nil {
		t.Fatalf("PutPacked: %v", err)
	}
	want := map[cid.Cid]int{before.CID(): len(before.Data())}
	for _, b := range blocks {
		want[b.CID()] = len(b.Data())
	}
	keys := allKeys(t, st)
	if len(keys) != len(want) {
		t.Errorf("AllKeys after PutPacked: %d keys, want %d", len(keys), len(want))
	}
	for _, k := range keys {
		if size, ok := want[k.c]; !ok || size != k.size {
			t.Errorf("AllKeys after PutPacked: %s of %d bytes, not a block put", k.c, k.size)
		}
	}
	for _, b := range blocks {
		if got := get(t, st, b.CID()); !bytes.Equal(got, b.Data()) {
			t.Fatalf("Get(%s) after PutPacked: wrong bytes", b.CID())
		}
	}
	if err := cas.PutPacked(ctx, st); err != nil {
		t.Errorf("PutPacked of nothing: %v", err)
	}
}

func (s *suite) testPutMany(t *testing.T) {
	st := s.store(t)
	const n = 2000
	blocks := make([]cas.Block, 0, n)
	for i := range n {
		if i%10 == 0 {
			blocks = append(blocks, cborBlock(fmt.Sprint("many-", i)))
		} else {
			blocks = append(blocks, rawBlock(fmt.Sprint("many-", i), i%1500))
		}
	}
	// Keep a copy: the store must not reorder the caller's slice.
	order := slices.Clone(blocks)
	put(t, st, blocks...)
	for i := range blocks {
		if !blocks[i].CID().Equals(order[i].CID()) {
			t.Fatal("Put reordered the caller's slice of blocks")
		}
	}
	if keys := allKeys(t, st); len(keys) != n {
		t.Errorf("AllKeys: %d keys, want %d", len(keys), n)
	}
	for _, b := range blocks {
		if got := get(t, st, b.CID()); !bytes.Equal(got, b.Data()) {
			t.Fatalf("Get(%s): wrong bytes", b.CID())
		}
	}
}

func checkNotFound(t *testing.T, op string, err error, c cid.Cid) {
	t.Helper()
	if err == nil {
		t.Errorf("%s of a missing block: nil error", op)
		return
	}
	if !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("%s of a missing block: %v, want an error wrapping cas.ErrNotFound", op, err)
	}
	var nf *cas.NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("%s of a missing block: %T %v, want a *cas.NotFoundError", op, err, err)
	} else if !nf.CID.Equals(c) {
		t.Errorf("%s of a missing block: NotFoundError names %s, want %s", op, nf.CID, c)
	}
}

func (s *suite) testNotFound(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	put(t, st, rawBlock("present", 10))
	for _, missing := range []cas.Block{rawBlock("missing", 10), cborBlock("missing"), v0Block(t, "missing")} {
		c := missing.CID()
		if has(t, st, c) {
			t.Errorf("Has(%s) of a missing block = true", c)
		}
		d, err := st.Get(ctx, c)
		checkNotFound(t, "Get", err, c)
		if d != nil {
			t.Errorf("Get of a missing block returned %d bytes", len(d))
		}
		err = st.View(ctx, c, func([]byte) error {
			t.Error("View called fn for a missing block")
			return nil
		})
		checkNotFound(t, "View", err, c)
	}
}

func (s *suite) testView(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	b := rawBlock("view", 5000)
	put(t, st, b)
	errStop := errors.New("fn's own error")
	err := st.View(ctx, b.CID(), func(d []byte) error {
		if !bytes.Equal(d, b.Data()) {
			t.Error("View: wrong bytes")
		}
		return errStop
	})
	if !errors.Is(err, errStop) {
		t.Errorf("View with fn returning an error = %v, want fn's error", err)
	}
	// The bytes are valid only during fn: a copy made inside survives.
	var kept []byte
	if err := st.View(ctx, b.CID(), func(d []byte) error {
		kept = bytes.Clone(d)
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	if !bytes.Equal(kept, b.Data()) {
		t.Error("copy made inside View: wrong bytes")
	}
}

func (s *suite) testDelete(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	a, b, c := rawBlock("del-a", 100), cborBlock("del-b"), rawBlock("del-c", 200000)
	gone := rawBlock("never-stored", 5)
	put(t, st, a, b, c)
	if err := st.Delete(ctx, a.CID(), c.CID(), gone.CID()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, x := range []cas.Block{a, c} {
		if has(t, st, x.CID()) {
			t.Errorf("Has(%s) after Delete = true", x.CID())
		}
		_, err := st.Get(ctx, x.CID())
		checkNotFound(t, "Get after Delete", err, x.CID())
	}
	if got := get(t, st, b.CID()); !bytes.Equal(got, b.Data()) {
		t.Error("Delete of other blocks damaged a kept one")
	}
	if keys := allKeys(t, st); len(keys) != 1 || !keys[0].c.Equals(b.CID()) {
		t.Errorf("AllKeys after Delete: %v, want only %s", keys, b.CID())
	}
	if err := st.Delete(ctx); err != nil {
		t.Errorf("Delete of nothing: %v", err)
	}
	if err := st.Delete(ctx, a.CID()); err != nil {
		t.Errorf("Delete of an absent block: %v", err)
	}
	// A deleted block can be put again.
	put(t, st, a)
	if got := get(t, st, a.CID()); !bytes.Equal(got, a.Data()) {
		t.Error("Get of a block put again after Delete: wrong bytes")
	}
}

func (s *suite) testAllKeys(t *testing.T) {
	st := s.store(t)
	if keys := allKeys(t, st); len(keys) != 0 {
		t.Fatalf("AllKeys of an empty store: %d keys", len(keys))
	}
	want := make(map[cid.Cid]int)
	blocks := sampleBlocks(t)
	for i := range 300 {
		blocks = append(blocks, rawBlock(fmt.Sprint("keys-", i), i*7), cborBlock(fmt.Sprint("keys-", i)))
	}
	for _, b := range blocks {
		want[b.CID()] = len(b.Data())
	}
	put(t, st, blocks...)
	keys := allKeys(t, st)
	if len(keys) != len(want) {
		t.Errorf("AllKeys: %d keys, want %d", len(keys), len(want))
	}
	for i, k := range keys {
		size, ok := want[k.c]
		if !ok {
			t.Errorf("AllKeys reported %s, which was never put (or twice)", k.c)
			continue
		}
		delete(want, k.c)
		if k.size != size {
			t.Errorf("AllKeys: %s has size %d, want %d", k.c, k.size, size)
		}
		if i > 0 && bytes.Compare(keys[i-1].c.Bytes(), k.c.Bytes()) >= 0 {
			t.Errorf("AllKeys: %s came after %s: not in byte order of the binary CIDs", k.c, keys[i-1].c)
		}
	}
	for c := range want {
		t.Errorf("AllKeys did not report %s", c)
	}
}

func (s *suite) testAllKeysStops(t *testing.T) {
	st := s.store(t)
	for i := range 50 {
		put(t, st, rawBlock(fmt.Sprint("stop-", i), 10))
	}
	errStop := errors.New("stop here")
	calls := 0
	err := st.AllKeys(context.Background(), func(cid.Cid, int) error {
		calls++
		if calls == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Errorf("AllKeys with fn failing = %v, want fn's error", err)
	}
	if calls != 3 {
		t.Errorf("AllKeys called fn %d times after it failed on the 3rd", calls)
	}
}

func checkCancelled(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%s with a cancelled context = %v, want context.Canceled", op, err)
	}
}

func (s *suite) testContextCancelled(t *testing.T) {
	st := s.store(t)
	a, b := rawBlock("ctx-a", 100), rawBlock("ctx-b", 100)
	put(t, st, a)
	if err := st.SetPin(context.Background(), "ctx", a.CID()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err := st.Has(ctx, a.CID())
	checkCancelled(t, "Has", err)
	_, err = st.Get(ctx, a.CID())
	checkCancelled(t, "Get", err)
	err = st.View(ctx, a.CID(), func([]byte) error {
		t.Error("View called fn with a cancelled context")
		return nil
	})
	checkCancelled(t, "View", err)
	checkCancelled(t, "Put", st.Put(ctx, b))
	checkCancelled(t, "PutPacked", cas.PutPacked(ctx, st, cas.Pack(b)))
	checkCancelled(t, "Delete", st.Delete(ctx, a.CID()))
	checkCancelled(t, "AllKeys", st.AllKeys(ctx, func(cid.Cid, int) error {
		t.Error("AllKeys called fn with a cancelled context")
		return nil
	}))
	checkCancelled(t, "SetPin", st.SetPin(ctx, "other", a.CID()))
	checkCancelled(t, "DeletePin", st.DeletePin(ctx, "ctx"))
	_, err = st.Pins(ctx)
	checkCancelled(t, "Pins", err)
	_, err = st.Pin(ctx, "ctx")
	checkCancelled(t, "Pin", err)

	// Nothing changed.
	if has(t, st, b.CID()) {
		t.Error("Put with a cancelled context stored the block")
	}
	if !has(t, st, a.CID()) {
		t.Error("Delete with a cancelled context removed the block")
	}
	pins, err := st.Pins(context.Background())
	if err != nil || len(pins) != 1 || pins[0].Name != "ctx" {
		t.Errorf("Pins after cancelled pin calls = %v, %v; want only the pin ctx", pins, err)
	}
}

func (s *suite) testAllKeysCancelled(t *testing.T) {
	st := s.store(t)
	for i := range 20 {
		put(t, st, rawBlock(fmt.Sprint("cancel-", i), 10))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := st.AllKeys(ctx, func(cid.Cid, int) error {
		calls++
		if calls == 2 {
			cancel()
		}
		return nil
	})
	checkCancelled(t, "AllKeys cancelled during the scan", err)
	if calls != 2 {
		t.Errorf("AllKeys called fn %d times; want it to stop after the 2nd cancelled the context", calls)
	}
}

func (s *suite) testRefs(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	a, b := rawBlock("ref-a", 10), cborBlock("ref-b")
	put(t, st, a, b)
	if nss, err := st.RefNamespaces(ctx); err != nil || len(nss) != 0 {
		t.Fatalf("RefNamespaces of an empty store = %v, %v", nss, err)
	}
	for _, r := range []struct{ ns, name string }{{"runs", "r2"}, {"runs", "r1"}, {"memo", "k/1"}} {
		if err := st.SetRef(ctx, r.ns, r.name, a.CID()); err != nil {
			t.Fatalf("SetRef(%s, %s): %v", r.ns, r.name, err)
		}
	}
	if err := st.SetRef(ctx, "runs", "r1", b.CID()); err != nil {
		t.Fatal(err)
	}
	if c, err := st.GetRef(ctx, "runs", "r1"); err != nil || c != b.CID() {
		t.Errorf("GetRef(runs, r1) = %v, %v; want %v (SetRef replaces)", c, err, b.CID())
	}
	refs, err := st.Refs(ctx, "runs")
	if err != nil || len(refs) != 2 || refs[0].Name != "r1" || refs[1].Name != "r2" {
		t.Errorf("Refs(runs) = %v, %v; want r1, r2", refs, err)
	}
	if nss, err := st.RefNamespaces(ctx); err != nil || !slices.Equal(nss, []string{"memo", "runs"}) {
		t.Errorf("RefNamespaces = %v, %v; want [memo runs]", nss, err)
	}
	// Refs and pins do not mix.
	if pins, _ := st.Pins(ctx); len(pins) != 0 {
		t.Errorf("Pins = %v; refs must not show as pins", pins)
	}
	if c, err := st.Pin(ctx, "r1"); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("Pin(r1) = %s, %v; refs must not show as pins", c, err)
	}
	if _, err := st.GetRef(ctx, "runs", "nope"); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("GetRef of a missing ref = %v, want ErrNotFound", err)
	}
	if _, err := st.GetRef(ctx, "none", "r1"); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("GetRef in a missing namespace = %v, want ErrNotFound", err)
	}
	if err := st.DeleteRef(ctx, "memo", "k/1"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteRef(ctx, "memo", "k/1"); !errors.Is(err, cas.ErrNotFound) {
		t.Errorf("second DeleteRef = %v, want ErrNotFound", err)
	}
	if nss, _ := st.RefNamespaces(ctx); !slices.Equal(nss, []string{"runs"}) {
		t.Errorf("RefNamespaces after emptying memo = %v, want [runs]", nss)
	}
	for _, bad := range []struct{ ns, name string }{{"Runs", "x"}, {"", "x"}, {"ru-ns", "x"}, {"runs", "../x"}, {"runs", ""}} {
		if err := st.SetRef(ctx, bad.ns, bad.name, a.CID()); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("SetRef(%q, %q) = %v, want ErrInvalid", bad.ns, bad.name, err)
		}
	}
	if roots, err := cas.Roots(ctx, st); err != nil || len(roots) != 2 {
		t.Errorf("Roots = %v, %v; want the two runs refs", roots, err)
	}

	// SetRefs is all or none: one bad ref and none is set.
	err = st.SetRefs(ctx, cas.Ref{NS: "memo", Name: "m1", CID: a.CID()}, cas.Ref{NS: "memo", Name: "../m2", CID: a.CID()})
	if !errors.Is(err, cas.ErrInvalid) {
		t.Errorf("SetRefs with a bad name = %v, want ErrInvalid", err)
	}
	if err := st.SetRefs(ctx, cas.Ref{NS: "memo", Name: "m3"}); !errors.Is(err, cas.ErrInvalid) {
		t.Errorf("SetRefs with an undefined CID = %v, want ErrInvalid", err)
	}
	if refs, _ := st.Refs(ctx, "memo"); len(refs) != 0 {
		t.Errorf("after failed SetRefs, Refs(memo) = %v; want none", refs)
	}
	err = st.SetRefs(ctx, cas.Ref{NS: "memo", Name: "m1", CID: a.CID()}, cas.Ref{NS: "runs", Name: "r2", CID: b.CID()}, cas.Ref{NS: "memo", Name: "m2", CID: b.CID()})
	if err != nil {
		t.Fatalf("SetRefs: %v", err)
	}
	for _, want := range []cas.Ref{{NS: "memo", Name: "m1", CID: a.CID()}, {NS: "memo", Name: "m2", CID: b.CID()}, {NS: "runs", Name: "r2", CID: b.CID()}} {
		if c, err := st.GetRef(ctx, want.NS, want.Name); err != nil || c != want.CID {
			t.Errorf("after SetRefs, GetRef(%s, %s) = %v, %v; want %v", want.NS, want.Name, c, err, want.CID)
		}
	}
	if err := st.SetRefs(ctx); err != nil {
		t.Errorf("SetRefs of nothing = %v", err)
	}
}

func (s *suite) testPins(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	a, b := rawBlock("pin-a", 10), cborBlock("pin-b")
	put(t, st, a, b)
	missing := rawBlock("pin-missing", 10) // a pin may name an absent block

	pins, err := st.Pins(ctx)
	if err != nil || len(pins) != 0 {
		t.Fatalf("Pins of an empty store = %v, %v", pins, err)
	}
	set := func(name string, c cid.Cid) {
		t.Helper()
		if err := st.SetPin(ctx, name, c); err != nil {
			t.Fatalf("SetPin(%q): %v", name, err)
		}
	}
	set("zeta", a.CID())
	set("alpha", b.CID())
	set("alpha/beta", a.CID())
	set("alpha-beta", missing.CID())
	set("Alpha", a.CID())
	set("alpha.v2@host+x", b.CID())
	set("0", a.CID())
	check := func(want map[string]cid.Cid) {
		t.Helper()
		got, err := st.Pins(ctx)
		if err != nil {
			t.Fatalf("Pins: %v", err)
		}
		if !slices.IsSortedFunc(got, func(x, y cas.Pin) int { return strings.Compare(x.Name, y.Name) }) {
			t.Errorf("Pins not sorted by name: %v", got)
		}
		if len(got) != len(want) {
			t.Errorf("Pins = %v, want %v", got, want)
		}
		for _, p := range got {
			if c, ok := want[p.Name]; !ok || !c.Equals(p.CID) {
				t.Errorf("Pins has %s→%s, want %s→%s", p.Name, p.CID, p.Name, c)
			}
		}
		// Pin finds each one alone, and no other name.
		for name, c := range want {
			if got, err := st.Pin(ctx, name); err != nil || !got.Equals(c) {
				t.Errorf("Pin(%q) = %s, %v; want %s", name, got, err, c)
			}
		}
		for _, name := range []string{"zeta", "never", "alph", "alpha/", "ALPHA", ""} {
			if _, ok := want[name]; ok {
				continue
			}
			if got, err := st.Pin(ctx, name); !errors.Is(err, cas.ErrNotFound) {
				t.Errorf("Pin(%q) of a missing pin = %s, %v; want an error wrapping cas.ErrNotFound", name, got, err)
			}
		}
	}
	want := map[string]cid.Cid{
		"zeta":            a.CID(),
		"alpha":           b.CID(),
		"alpha/beta":      a.CID(),
		"alpha-beta":      missing.CID(),
		"Alpha":           a.CID(),
		"alpha.v2@host+x": b.CID(),
		"0":               a.CID(),
	}
	check(want)

	// SetPin replaces.
	set("alpha", a.CID())
	want["alpha"] = a.CID()
	check(want)

	if err := st.DeletePin(ctx, "zeta"); err != nil {
		t.Fatalf("DeletePin: %v", err)
	}
	delete(want, "zeta")
	check(want)
	for _, name := range []string{"zeta", "never", "alph"} {
		err := st.DeletePin(ctx, name)
		if !errors.Is(err, cas.ErrNotFound) {
			t.Errorf("DeletePin(%q) of a missing pin = %v, want an error wrapping cas.ErrNotFound", name, err)
		}
	}
	check(want)
	// Pins do not keep blocks: deleting a pinned block is allowed here
	// (gc decides), and the pin stays.
	if err := st.Delete(ctx, b.CID()); err != nil {
		t.Fatal(err)
	}
	check(want)
}

func (s *suite) testPinNames(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	c := rawBlock("names", 10).CID()
	for _, name := range []string{"", "../x", "a//b", "-x", ".x", "a/./b", "a/../b", "a/", "/a", "a b", "a\x00b", "é", strings.Repeat("x", 256), "bafkqaaa", c.String()} {
		err := st.SetPin(ctx, name, c)
		if !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("SetPin(%q) = %v, want an error wrapping cas.ErrInvalid", name, err)
		}
	}
	for _, name := range []string{"x", "a/b", "A9._/@+-z", strings.Repeat("x", 255)} {
		if err := st.SetPin(ctx, name, c); err != nil {
			t.Errorf("SetPin(%q) of a valid name: %v", name, err)
		}
	}
	pins, err := st.Pins(ctx)
	if err != nil || len(pins) != 4 {
		t.Errorf("Pins = %d pins, %v; want the 4 valid ones", len(pins), err)
	}
}

func (s *suite) testUseAfterClose(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	a := rawBlock("closed", 10)
	put(t, st, a)
	if err := st.SetPin(ctx, "p", a.CID()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := st.Has(ctx, a.CID()); err == nil {
		t.Error("Has after Close: nil error")
	}
	if _, err := st.Get(ctx, a.CID()); err == nil {
		t.Error("Get after Close: nil error")
	}
	if err := st.View(ctx, a.CID(), func([]byte) error { return nil }); err == nil {
		t.Error("View after Close: nil error")
	}
	if err := st.Put(ctx, rawBlock("after", 10)); err == nil {
		t.Error("Put after Close: nil error")
	}
	if err := cas.PutPacked(ctx, st, cas.Pack(rawBlock("after", 10))); err == nil {
		t.Error("PutPacked after Close: nil error")
	}
	if err := st.Delete(ctx, a.CID()); err == nil {
		t.Error("Delete after Close: nil error")
	}
	if err := st.AllKeys(ctx, func(cid.Cid, int) error { return nil }); err == nil {
		t.Error("AllKeys after Close: nil error")
	}
	if err := st.SetPin(ctx, "q", a.CID()); err == nil {
		t.Error("SetPin after Close: nil error")
	}
	if err := st.DeletePin(ctx, "p"); err == nil {
		t.Error("DeletePin after Close: nil error")
	}
	if _, err := st.Pins(ctx); err == nil {
		t.Error("Pins after Close: nil error")
	}
	if _, err := st.Pin(ctx, "p"); err == nil {
		t.Error("Pin after Close: nil error")
	}
	_ = st.Close() // a second Close may fail but must not panic
}

func (s *suite) testConcurrent(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	const workers, perWorker = 8, 40
	shared := make([]cas.Block, 20)
	for i := range shared {
		shared[i] = rawBlock(fmt.Sprint("shared-", i), 100+i*1000)
	}
	put(t, st, shared[:5]...)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				own := rawBlock(fmt.Sprint("worker-", w, "-", i), 50+i*100)
				if err := st.Put(ctx, own, shared[(w+i)%len(shared)]); err != nil {
					t.Errorf("worker %d: Put: %v", w, err)
					return
				}
				for _, b := range []cas.Block{own, shared[i%5]} {
					got, err := st.Get(ctx, b.CID())
					if err != nil || !bytes.Equal(got, b.Data()) {
						t.Errorf("worker %d: Get(%s) = %d bytes, %v", w, b.CID(), len(got), err)
						return
					}
				}
				if err := st.View(ctx, own.CID(), func(d []byte) error {
					if !bytes.Equal(d, own.Data()) {
						return errors.New("wrong bytes")
					}
					return nil
				}); err != nil {
					t.Errorf("worker %d: View: %v", w, err)
					return
				}
				if _, err := st.Has(ctx, shared[(w*i)%len(shared)].CID()); err != nil {
					t.Errorf("worker %d: Has: %v", w, err)
					return
				}
				if i%10 == 0 {
					if err := st.SetPin(ctx, fmt.Sprint("w", w), own.CID()); err != nil {
						t.Errorf("worker %d: SetPin: %v", w, err)
						return
					}
					if err := st.AllKeys(ctx, func(cid.Cid, int) error { return nil }); err != nil {
						t.Errorf("worker %d: AllKeys: %v", w, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if n := len(allKeys(t, st)); n != workers*perWorker+len(shared) {
		t.Errorf("after concurrent Puts: %d blocks, want %d", n, workers*perWorker+len(shared))
	}
	pins, err := st.Pins(ctx)
	if err != nil || len(pins) != workers {
		t.Errorf("after concurrent SetPins: %d pins, %v; want %d", len(pins), err, workers)
	}
}

func checkCorrupt(t *testing.T, op string, err error, c cid.Cid) {
	t.Helper()
	if !errors.Is(err, cas.ErrCorrupt) {
		t.Errorf("%s of a corrupted block = %v, want an error wrapping cas.ErrCorrupt", op, err)
	}
	var ce *cas.CorruptError
	if !errors.As(err, &ce) {
		t.Errorf("%s of a corrupted block: %T, want a *cas.CorruptError", op, err)
	} else if !ce.CID.Equals(c) {
		t.Errorf("%s of a corrupted block: CorruptError names %s, want %s", op, ce.CID, c)
	}
}

func (s *suite) testCorrupt(t *testing.T) {
	if s.opts.Corrupt == nil {
		t.Skip("no Corrupt hook")
	}
	st := s.store(t)
	ctx := context.Background()
	good := rawBlock("corrupt-good", 3000)
	flipped := rawBlock("corrupt-flip", 3000)
	big := rawBlock("corrupt-big", chunkSize)
	node := cborBlock("corrupt-node")
	short := rawBlock("corrupt-short", 500)
	v0 := v0Block(t, "corrupt-v0")
	put(t, st, good, flipped, big, node, short, v0)

	flip := func(b cas.Block, at int) []byte {
		d := bytes.Clone(b.Data())
		d[at] ^= 0x01
		return d
	}
	replaced := map[cid.Cid][]byte{
		flipped.CID(): flip(flipped, 1234),
		big.CID():     flip(big, len(big.Data())-1),
		node.CID():    flip(node, 0),
		short.CID():   short.Data()[:499],
		v0.CID():      flip(v0, 7),
	}
	for c, d := range replaced {
		s.opts.Corrupt(t, st, c, d)
	}
	for c := range replaced {
		_, err := st.Get(ctx, c)
		checkCorrupt(t, "Get", err, c)
		err = st.View(ctx, c, func([]byte) error {
			t.Errorf("View called fn with the corrupted block %s", c)
			return nil
		})
		checkCorrupt(t, "View", err, c)
		if !has(t, st, c) {
			t.Errorf("Has(%s) of a corrupted block = false; Has does not verify", c)
		}
	}
	sizes := make(map[cid.Cid]int)
	for _, k := range allKeys(t, st) {
		sizes[k.c] = k.size
	}
	for c, d := range replaced {
		if sizes[c] != len(d) {
			t.Errorf("AllKeys: corrupted %s has size %d, want the %d stored", c, sizes[c], len(d))
		}
	}
	if got := get(t, st, good.CID()); !bytes.Equal(got, good.Data()) {
		t.Error("a block next to corrupted ones: wrong bytes")
	}
	// Deleting a corrupted block and putting it again repairs it.
	if err := st.Delete(ctx, flipped.CID()); err != nil {
		t.Fatal(err)
	}
	put(t, st, flipped)
	if got := get(t, st, flipped.CID()); !bytes.Equal(got, flipped.Data()) {
		t.Error("a corrupted block deleted and put again: wrong bytes")
	}
}
