package cas_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
)

// filesIn returns a store function for Outline that puts each value as a
// file into st, and counts the calls.
func filesIn(t *testing.T, st cas.Store, calls *int) func([]byte) (cid.Cid, error) {
	return func(enc []byte) (cid.Cid, error) {
		*calls++
		c, _, err := cas.PutFile(context.Background(), st, bytes.NewReader(enc), nil)
		return c, err
	}
}

func bigText(seed string, n int) string {
	return strings.Repeat(seed, n/len(seed)+1)[:n]
}

// encodedLen is what Outline measures: the length of EncodeNode's output.
func encodedLen(t *testing.T, v any) int {
	t.Helper()
	enc, err := cas.EncodeNode(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(enc)
}

// Outline measures values as the encoder writes them: a value at the
// threshold stays, one byte more goes out of line, for every kind and
// every head width.
func TestOutlineThresholdIsExact(t *testing.T) {
	st := memstore.New()
	calls := 0
	store := filesIn(t, st, &calls)
	// A string whose encoding (a 5-byte head and its bytes) is exactly
	// OutlineOver bytes stays; one byte longer, it goes.
	at := bigText("a", cas.OutlineOver-5)
	over := bigText("b", cas.OutlineOver-4)
	if got := encodedLen(t, at); got != cas.OutlineOver {
		t.Fatalf("test value of %d bytes", got)
	}
	m := map[string]any{"at": at, "over": over, "pad": bigText("c", cas.MaxBlockSize)}
	out, err := cas.Outline(m, cas.MaxBlockSize, store)
	if err != nil {
		t.Fatal(err)
	}
	if out["at"] != at {
		t.Errorf("a value of exactly %d bytes went out of line", cas.OutlineOver)
	}
	if _, ok := out["over"].(cas.Link); !ok {
		t.Errorf("a value of %d bytes stayed in place", cas.OutlineOver+1)
	}
	// Sizes of every kind and head width agree with the encoder: a list
	// of them padded to just over the threshold is split or kept exactly
	// as its encoding says.
	samples := []any{nil, true, false, int64(0), int64(23), int64(24), int64(255), int64(256), int64(65535), int64(65536),
		int64(math.MaxUint32), int64(math.MaxUint32) + 1, int64(math.MaxInt64), int64(-1), int64(-24), int64(-25), int64(-257),
		int64(math.MinInt64), new(big.Int).SetUint64(math.MaxUint64), new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64)),
		1.5, "", "é", bigText("x", 23), bigText("x", 24), bigText("x", 300), bigText("x", 70000), []byte{}, []byte("bytes"),
		[]any{}, map[string]any{}, map[string]any{"k": []any{int64(1), "v"}}}
	for i, s := range samples {
		n := encodedLen(t, s)
		for _, extra := range []int{0, 1} {
			// An array head, s, and a string with a 5-byte head.
			list := []any{s, bigText("p", cas.OutlineOver-1-n-5+extra)}
			if got := encodedLen(t, list); got != cas.OutlineOver+extra {
				t.Fatalf("sample %d: test list of %d bytes", i, got)
			}
			v, err := cas.Outline(map[string]any{"v": list, "pad": bigText("q", cas.MaxBlockSize)}, cas.MaxBlockSize, store)
			if err != nil {
				t.Fatal(err)
			}
			_, kept := v["v"].([]any)
			if kept && reflect.ValueOf(v["v"]).Pointer() != reflect.ValueOf(list).Pointer() {
				kept = false // split: a copy with a member out of line
			}
			if kept != (extra == 0) {
				t.Errorf("sample %d (%v): a list of %d bytes: kept %v", i, s, cas.OutlineOver+extra, kept)
			}
		}
	}
}

// A value outlined comes back whole through Inline; the object fits its
// budget; the files hold no links; the same value makes the same link,
// stored once.
func TestOutlineRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	calls := 0
	store := filesIn(t, st, &calls)
	text := bigText("0123456789abcdef", 3<<20)
	ints := make([]any, 600000) // ~1.8 MB of small items: the list goes whole
	for i := range ints {
		ints[i] = int64(i)
	}
	m := map[string]any{
		"text":   text,
		"again":  text,
		"small":  "stays",
		"nested": map[string]any{"deep": []any{bigText("z", 2<<20), int64(1)}, "n": int64(2)},
		"ints":   ints,
		"bytes":  bytes.Repeat([]byte{1, 2, 3}, 1<<20),
	}
	budget := cas.MaxBlockSize
	out, err := cas.Outline(m, budget, store)
	if err != nil {
		t.Fatal(err)
	}
	if n := encodedLen(t, out); n > budget {
		t.Fatalf("outlined object of %d bytes, budget %d", n, budget)
	}
	if out["small"] != "stays" {
		t.Errorf("a small member moved: %v", out["small"])
	}
	if out["text"] != out["again"] {
		t.Errorf("one value, two links: %v, %v", out["text"], out["again"])
	}
	nested, ok := out["nested"].(map[string]any)
	if !ok {
		t.Fatalf("nested map went whole: %v", out["nested"])
	}
	if deep, ok := nested["deep"].([]any); !ok || deep[1] != int64(1) {
		t.Fatalf("the list around a large string went whole: %v", nested["deep"])
	} else if _, ok := deep[0].(cas.Link); !ok {
		t.Fatalf("the large string inside stayed")
	}
	if _, ok := out["ints"].(cas.Link); !ok {
		t.Errorf("a list of many small items stayed in place")
	}
	if calls != 4 { // text once, the deep string, ints, bytes
		t.Errorf("%d values stored, want 4", calls)
	}
	back, err := cas.Inline(out, func(c cid.Cid) (any, error) { return cas.ReadOutlined(ctx, st, c) })
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cas.DecodeNode(mustEncode(t, m))
	if !reflect.DeepEqual(back, want) {
		t.Fatal("the value read back differs")
	}
	// Stored, the links are links (tag 42) inside a typed object too, and
	// decode as CIDs, which Inline reads back the same.
	type holder struct {
		Payload map[string]any `cbor:"payload"`
	}
	var h holder
	if err := cas.Unmarshal(mustMarshal(t, &holder{Payload: out}), &h); err != nil {
		t.Fatal(err)
	}
	if c, ok := cas.LinkOf(h.Payload["text"]); !ok || c != out["text"].(cas.Link).Cid {
		t.Fatalf("an outlined value decodes as %T, not its link", h.Payload["text"])
	}
	if !bytes.Equal(mustMarshal(t, &holder{Payload: out}), mustEncode(t, map[string]any{"payload": out})) {
		t.Error("Marshal and EncodeNode encode the outlined map differently")
	}
	back, err = cas.Inline(h.Payload, func(c cid.Cid) (any, error) { return cas.ReadOutlined(ctx, st, c) })
	if err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("the value read back from the stored object differs (%v)", err)
	}
	// The same map outlined again makes the same object.
	again, err := cas.Outline(m, budget, store)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustEncode(t, again), mustEncode(t, out)) {
		t.Error("the same map outlined twice differs")
	}
	// Every block stored is within the limit.
	st.AllKeys(ctx, func(c cid.Cid, size int) error {
		if size > cas.MaxBlockSize {
			t.Errorf("block %s of %d bytes", c, size)
		}
		return nil
	})
	// A map that fits is returned as it is, and Inline of a map without
	// links is the map itself.
	small := map[string]any{"a": "b"}
	if got, _ := cas.Outline(small, budget, store); reflect.ValueOf(got).Pointer() != reflect.ValueOf(small).Pointer() {
		t.Error("a map within budget was copied")
	}
	if got, _ := cas.Inline(small, nil); reflect.ValueOf(got).Pointer() != reflect.ValueOf(small).Pointer() {
		t.Error("Inline copied a map without links")
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	enc, err := cas.EncodeNode(v)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// Members each under the threshold but over the budget together go out
// of line whole, largest first (by key among equals), until the object
// fits; an object whose keys alone are over the budget is refused.
func TestOutlineTopLevel(t *testing.T) {
	st := memstore.New()
	calls := 0
	store := filesIn(t, st, &calls)
	m := map[string]any{}
	for i := range 8 {
		m[fmt.Sprintf("m%d", i)] = bigText(fmt.Sprint(i), 900<<10)
	}
	m["m9"] = bigText("9", 901<<10)
	out, err := cas.Outline(m, cas.MaxBlockSize, store)
	if err != nil {
		t.Fatal(err)
	}
	var moved []string
	for _, k := range []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"} {
		if _, ok := out[k].(cas.Link); ok {
			moved = append(moved, k)
		}
	}
	// 9 members of 900 KiB and more make 8.1 MiB: four may stay.
	if got := strings.Join(moved, " "); got != "m0 m1 m2 m3 m9" {
		t.Errorf("moved %s; want m9 (the largest) and then m0..m3 (by key)", got)
	}
	if n := encodedLen(t, out); n > cas.MaxBlockSize {
		t.Errorf("object of %d bytes", n)
	}

	keys := map[string]any{}
	for i := range 300000 {
		keys[fmt.Sprintf("key-%07d", i)] = int64(i)
	}
	if _, err := cas.Outline(keys, cas.MaxBlockSize, store); !errors.Is(err, cas.ErrTooLarge) {
		t.Fatalf("300,000 keys: %v, want ErrTooLarge", err)
	}
	// A link in the value is refused: a reader would take it for an
	// outlined value.
	withLink := map[string]any{"l": cas.Sum(cas.Raw, nil), "pad": bigText("p", cas.MaxBlockSize)}
	if _, err := cas.Outline(withLink, cas.MaxBlockSize, store); !errors.Is(err, cas.ErrInvalid) {
		t.Fatalf("a link: %v, want ErrInvalid", err)
	}
}

// ReadOutlined refuses what Outline never makes: a raw block, a file that
// is not one canonical item, a value holding a link.
func TestReadOutlinedRefuses(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	file := func(data []byte) cid.Cid {
		c, _, err := cas.PutFile(ctx, st, bytes.NewReader(data), nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	raw := cas.NewBlock(cas.Raw, mustEncode(t, "text"))
	if err := st.Put(ctx, raw); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		c    cid.Cid
		want error
	}{
		"raw block":     {raw.CID(), cas.ErrInvalid},
		"not canonical": {file([]byte{0x19, 0x00, 0x01}), cas.ErrNotCanonical}, // 1 in a 3-byte head
		"two items":     {file([]byte{0x01, 0x02}), cas.ErrNotCanonical},
		"a link inside": {file(mustEncode(t, []any{cas.Sum(cas.Raw, nil)})), cas.ErrInvalid},
		"missing":       {cas.Sum(cas.DagCBOR, []byte("nothing")), cas.ErrNotFound},
	}
	for name, tc := range cases {
		if _, err := cas.ReadOutlined(ctx, st, tc.c); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if v, err := cas.ReadOutlined(ctx, st, file(mustEncode(t, "fine"))); err != nil || v != "fine" {
		t.Errorf("a good file: %v, %v", v, err)
	}
}

// An object over the block limit is stored as a file under an envelope
// that lists its links: every block fits, a walk from the envelope
// reaches what the object links, and GetObject reads it back. An envelope
// that lies about the links, or wraps an object that fits, is refused.
func TestPutObjectEnvelope(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	type obj struct {
		Type  string     `cbor:"type"`
		Items []cas.Link `cbor:"items"`
		Text  string     `cbor:"text"`
	}
	leaves := []cid.Cid{}
	for i := range 3 {
		b := cas.NewBlock(cas.Raw, []byte(fmt.Sprint("leaf ", i)))
		if err := st.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, b.CID())
	}
	o := obj{Type: "test/object@1", Text: bigText("t", 6<<20)}
	for i := range 30000 { // repeats: the envelope lists each link once
		o.Items = append(o.Items, cas.Link{Cid: leaves[i%3]})
	}
	put := func(v any) cid.Cid {
		data, err := cas.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return putObject(t, st, data)
	}
	c := put(&o)
	var env cas.Large
	data, err := st.Get(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := cas.Unmarshal(data, &env); err != nil || env.Type != cas.TypeLarge || len(env.Links) != 3 {
		t.Fatalf("envelope %+v, %v", env, err)
	}
	var back obj
	if err := cas.GetObject(ctx, st, c, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, o) {
		t.Fatal("the object read back differs")
	}
	reached := map[cid.Cid]bool{}
	if err := cas.Walk(ctx, st, []cid.Cid{c}, nil, func(c cid.Cid, data []byte) error {
		reached[c] = true
		if len(data) > cas.MaxBlockSize {
			t.Errorf("block %s of %d bytes", c, len(data))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, l := range leaves {
		if !reached[l] {
			t.Errorf("the walk from the envelope misses %s", l)
		}
	}
	// A small object is its own block.
	small := obj{Type: "test/object@1", Items: []cas.Link{}, Text: "short"}
	sc := put(&small)
	if sc != cas.Sum(cas.DagCBOR, mustMarshal(t, &small)) {
		t.Error("a small object was not stored as its own block")
	}
	// Envelopes that lie.
	lie := func(e cas.Large) cid.Cid {
		b := cas.NewBlock(cas.DagCBOR, mustMarshal(t, &e))
		if err := st.Put(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b.CID()
	}
	smallFile, _, err := cas.PutFile(ctx, st, bytes.NewReader(mustMarshal(t, &small)), nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]cas.Large{
		"a link left out": {Type: cas.TypeLarge, Content: env.Content, Links: env.Links[:2]},
		"a link added":    {Type: cas.TypeLarge, Content: env.Content, Links: append(append([]cas.Link{}, env.Links...), cas.Link{Cid: sc})},
		"content fits":    {Type: cas.TypeLarge, Content: cas.Link{Cid: smallFile}, Links: []cas.Link{}},
	} {
		var v obj
		if err := cas.GetObject(ctx, st, lie(e), &v); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := cas.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ReadObjectBlocks reads back every block of an object, an envelope's
// content too, and fails on one that is damaged, as GetObject does.
func TestReadObjectBlocks(t *testing.T) {
	ctx := context.Background()
	st := storetest.NewCorruptible(memstore.New())
	put := func(data []byte) cid.Cid { return putObject(t, st, data) }
	small, err := cas.Marshal(map[string]any{"type": "test/object@1", "text": "small"})
	if err != nil {
		t.Fatal(err)
	}
	large, err := cas.Marshal(map[string]any{"type": "test/object@1", "text": bigText("t", 3<<20)})
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{small, large} {
		c := put(data)
		if err := cas.ReadObjectBlocks(ctx, st, c); err != nil {
			t.Fatalf("intact: %v", err)
		}
		// Damage the last block the object reaches: the envelope's last
		// chunk, or the object's own block.
		var last cid.Cid
		if err := cas.Walk(ctx, st, []cid.Cid{c}, nil, func(b cid.Cid, _ []byte) error { last = b; return nil }); err != nil {
			t.Fatal(err)
		}
		if !st.Corrupt(last, []byte("damaged")) {
			t.Fatal("not stored")
		}
		if err := cas.ReadObjectBlocks(ctx, st, c); !errors.Is(err, cas.ErrCorrupt) {
			t.Errorf("%d bytes, block %s damaged: %v", len(data), last, err)
		}
	}
}

// putObject stores the encoded object data in st as cas.PutObject does.
func putObject(t *testing.T, st cas.Store, data []byte) cid.Cid {
	t.Helper()
	w := cas.NewWriter(st)
	c, err := cas.PutObject(context.Background(), w, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}
