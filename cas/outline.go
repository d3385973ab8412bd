package cas

import (
	"bytes"
	"context"
	"fmt"
	"math/big"
	"slices"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
)

// OutlineOver is the size, in bytes of canonical encoding, over which
// [Outline] stores a value out of line when the object holding it is
// over its budget.
const OutlineOver = ChunkSize

// Outline returns m when its canonical encoding is at most budget bytes.
// Otherwise it returns a copy of m in which values are stored out of
// line, each as a file holding its canonical DAG-CBOR encoding (store
// stores those bytes, as [PutFile] does, and returns the file's root)
// and replaced by a link to it (a [Link], which [Marshal] encodes as one
// inside any field; decoded, it is a cid.Cid):
//
//   - every value whose encoding is over [OutlineOver], unless it is a
//     list or a map that comes to at most OutlineOver once its own
//     members have been through this rule (it then stays, holding links);
//   - then, while m is still over budget, the largest member of m left
//     in place (the first by key among equals), whole.
//
// A value stored out of line is always stored whole, as it was in m:
// the files hold no links, so that the links of the object are all in
// its own block, where walks, gc and bundles see them. The rule is a
// function of m and budget alone, so the same value makes the same
// files and the same links wherever it appears: a large input kept in
// every state of a run is stored once.
//
// m must hold data-model values ([EncodeNode]) and no link: a reader
// ([Inline]) takes every link for an outlined value. The error wraps
// [ErrTooLarge] when m cannot be brought within budget (its keys alone
// are too many), [ErrInvalid] when it holds a link.
func Outline(m map[string]any, budget int, store func(enc []byte) (cid.Cid, error)) (map[string]any, error) {
	size, err := encodedSize(m, 0)
	if err != nil {
		return nil, err
	}
	if size <= budget {
		return m, nil
	}
	if HasLink(m) {
		return nil, fmt.Errorf("a value to outline holds a link, which a reader would take for an outlined value: %w", ErrInvalid)
	}
	o := outliner{store: store, done: map[string]cid.Cid{}}
	// What goes where is planned first, and only then stored, so that
	// no file is stored for a value that ends up inside another.
	planned := make(map[string]int, len(m))
	apart := map[string]bool{} // members the first rule stores whole
	total := headLen(uint64(len(m)))
	for k, v := range m {
		n, whole, err := o.plan(v, 1)
		if err != nil {
			return nil, err
		}
		planned[k], apart[k] = n, whole
		total += headLen(uint64(len(k))) + len(k) + n
	}
	whole := map[string]bool{}
	for total > budget {
		best := ""
		for k, n := range planned {
			if apart[k] || whole[k] || n <= outlinedSize {
				continue // stored apart already, or no smaller apart
			}
			if best == "" || n > planned[best] || (n == planned[best] && k < best) {
				best = k
			}
		}
		if best == "" {
			return nil, fmt.Errorf("an object of %d members is over %d bytes even with its values stored apart: %w", len(m), budget, ErrTooLarge)
		}
		total += outlinedSize - planned[best]
		planned[best], whole[best] = outlinedSize, true
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		var nv any
		var err error
		if whole[k] {
			nv, err = o.link(v)
		} else {
			nv, err = o.apply(v, 1)
		}
		if err != nil {
			return nil, err
		}
		out[k] = nv
	}
	return out, nil
}

// outlinedSize is the size of the link that stands for an outlined
// value: a CIDv1 of an hg/file@1 root (DAG-CBOR, sha2-256).
var outlinedSize = linkSize(Sum(DagCBOR, nil))

// outliner stores the values of one [Outline] call; a string met twice
// (a state holding its input's value at two places) is stored once.
type outliner struct {
	store func([]byte) (cid.Cid, error)
	done  map[string]cid.Cid // outlined strings
}

// plan returns the size of what the first rule of [Outline] puts in the
// place of v, and whether that is v stored whole, without storing
// anything.
func (o *outliner) plan(v any, depth int) (int, bool, error) {
	size, err := encodedSize(v, depth)
	if err != nil || size <= OutlineOver {
		return size, false, err
	}
	n := 0
	switch x := v.(type) {
	case []any:
		n = headLen(uint64(len(x)))
		for _, e := range x {
			en, _, err := o.plan(e, depth+1)
			if err != nil {
				return 0, false, err
			}
			n += en
		}
	case map[string]any:
		n = headLen(uint64(len(x)))
		for k, e := range x {
			en, _, err := o.plan(e, depth+1)
			if err != nil {
				return 0, false, err
			}
			n += headLen(uint64(len(k))) + len(k) + en
		}
	default:
		return outlinedSize, true, nil
	}
	if n <= OutlineOver {
		return n, false, nil
	}
	return outlinedSize, true, nil
}

// apply puts in the place of v what plan measured: v itself, a copy of
// a list or map with members stored apart, or a link to v stored whole.
func (o *outliner) apply(v any, depth int) (any, error) {
	size, err := encodedSize(v, depth)
	if err != nil || size <= OutlineOver {
		return v, err
	}
	_, whole, err := o.plan(v, depth)
	if err != nil {
		return nil, err
	}
	if whole {
		return o.link(v)
	}
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if out[i], err = o.apply(e, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if out[k], err = o.apply(e, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return o.link(v)
}

// link stores v out of line and returns the link to it.
func (o *outliner) link(v any) (any, error) {
	c, err := o.whole(v)
	if err != nil {
		return nil, err
	}
	return Link{c}, nil
}

// whole stores v out of line and returns its CID.
func (o *outliner) whole(v any) (cid.Cid, error) {
	s, isString := v.(string)
	if isString {
		if c, ok := o.done[s]; ok {
			return c, nil
		}
	}
	enc, err := EncodeNode(v)
	if err != nil {
		return cid.Undef, err
	}
	c, err := o.store(enc)
	if err != nil {
		return cid.Undef, err
	}
	if linkSize(c) != outlinedSize || c.Type() != DagCBOR {
		return cid.Undef, fmt.Errorf("outlined value stored as %s, not as the root of an hg/file@1: %w", c, ErrInvalid)
	}
	if isString {
		o.done[s] = c
	}
	return c, nil
}

// LinkOf returns the CID v stands for when v is a link in any of the
// forms a value may hold one: a cid.Cid ([DecodeNode]), a [Link], or
// the tag 42 [Unmarshal] gives in a field of type any.
func LinkOf(v any) (cid.Cid, bool) {
	switch x := v.(type) {
	case cid.Cid:
		return x, true
	case Link:
		return x.Cid, true
	case cbor.Tag:
		if b, ok := x.Content.([]byte); ok && x.Number == linkTag {
			if c, err := linkFromBytes(b); err == nil {
				return c, true
			}
		}
	}
	return cid.Undef, false
}

// HasLink reports whether v, a data-model value, holds a link in any
// form [LinkOf] reads, or another tag.
func HasLink(v any) bool {
	switch x := v.(type) {
	case cid.Cid, Link, cbor.Tag:
		return true
	case []any:
		return slices.ContainsFunc(x, HasLink)
	case map[string]any:
		for _, e := range x {
			if HasLink(e) {
				return true
			}
		}
	}
	return false
}

// Inline returns m with every link in it (in any form [LinkOf] reads)
// replaced by the value it outlines, as read returns it ([ReadOutlined], or a cache of it). It
// returns m itself when m holds no link, and shares with m every list
// and map that holds none.
func Inline(m map[string]any, read func(cid.Cid) (any, error)) (map[string]any, error) {
	if !HasLink(m) {
		return m, nil
	}
	v, err := inline(m, read)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func inline(v any, read func(cid.Cid) (any, error)) (any, error) {
	if c, ok := LinkOf(v); ok {
		return read(c)
	}
	switch x := v.(type) {
	case cbor.Tag:
		return nil, fmt.Errorf("tag %d where a link or a value is expected: %w", x.Number, ErrInvalid)
	case []any:
		if !HasLink(x) {
			return x, nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			ne, err := inline(e, read)
			if err != nil {
				return nil, err
			}
			out[i] = ne
		}
		return out, nil
	case map[string]any:
		if !HasLink(x) {
			return x, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			ne, err := inline(e, read)
			if err != nil {
				return nil, err
			}
			out[k] = ne
		}
		return out, nil
	}
	return v, nil
}

// ReadOutlined reads the value an outlined link c stands for ([Outline]):
// the content of the hg/file@1 at c, read and checked as [ReadFile] does,
// decoded strictly with [DecodeNode]. A file that is no canonical
// DAG-CBOR item, or whose value holds a link, is refused (the error wraps
// [ErrNotCanonical] or [ErrInvalid]); a missing or damaged block gives
// the store's error.
func ReadOutlined(ctx context.Context, st BlockReader, c cid.Cid) (any, error) {
	var buf bytes.Buffer
	if _, err := ReadFile(ctx, st, c, &buf, nil); err != nil {
		return nil, fmt.Errorf("outlined value %s: %w", c, err)
	}
	v, err := DecodeNode(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("outlined value %s: %w", c, err)
	}
	if HasLink(v) {
		return nil, fmt.Errorf("outlined value %s holds a link: %w", c, ErrInvalid)
	}
	return v, nil
}

// headLen is the length of a CBOR head with argument arg.
func headLen(arg uint64) int {
	switch {
	case arg < 24:
		return 1
	case arg <= 0xff:
		return 2
	case arg <= 0xffff:
		return 3
	case arg <= 0xffffffff:
		return 5
	}
	return 9
}

// linkSize is the length of the canonical encoding of a link to c.
func linkSize(c cid.Cid) int {
	n := c.ByteLen() + 1 // the 0x00 prefix
	return 2 + headLen(uint64(n)) + n
}

// encodedSize returns the length of the canonical DAG-CBOR encoding of
// a data-model value (see [EncodeNode]) without encoding it. depth is
// the nesting v sits at, for the limit the encoder applies.
func encodedSize(v any, depth int) (int, error) {
	switch x := v.(type) {
	case nil, bool:
		return 1, nil
	case string:
		return headLen(uint64(len(x))) + len(x), nil
	case []byte:
		return headLen(uint64(len(x))) + len(x), nil
	case float64:
		return 9, nil
	case int64:
		if x < 0 {
			return headLen(uint64(-1 - x)), nil
		}
		return headLen(uint64(x)), nil
	case int:
		return encodedSize(int64(x), depth)
	case *big.Int:
		if x.IsUint64() {
			return headLen(x.Uint64()), nil
		}
		m := new(big.Int).Neg(x)
		m.Sub(m, big.NewInt(1))
		if x.Sign() < 0 && m.IsUint64() {
			return headLen(m.Uint64()), nil
		}
	case cid.Cid:
		if x.Defined() {
			return linkSize(x), nil
		}
	case Link:
		if x.Defined() {
			return linkSize(x.Cid), nil
		}
	case []any:
		if depth >= maxDepth {
			break
		}
		n := headLen(uint64(len(x)))
		for _, e := range x {
			en, err := encodedSize(e, depth+1)
			if err != nil {
				return 0, err
			}
			n += en
		}
		return n, nil
	case map[string]any:
		if depth >= maxDepth {
			break
		}
		n := headLen(uint64(len(x)))
		for k, e := range x {
			en, err := encodedSize(e, depth+1)
			if err != nil {
				return 0, err
			}
			n += headLen(uint64(len(k))) + len(k) + en
		}
		return n, nil
	}
	// Anything else (other integer types, values EncodeNode refuses) is
	// measured, or refused, by the encoder itself.
	enc, err := EncodeNode(v)
	if err != nil {
		return 0, err
	}
	return len(enc), nil
}
