package cas

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ipfs/go-cid"
)

// TypeLarge is the type of the envelope of an object over the block
// limit ([PutObject]).
const TypeLarge = "hg/large@1"

// Large is the envelope under which an object whose encoding is over
// [MaxBlockSize] is stored: Content is an hg/file@1 holding the object's
// canonical encoding, and Links lists every distinct link that encoding
// holds, sorted by their bytes, so that walks, gc and bundles reach what
// the object links without reading the file (its chunks are raw
// blocks, whose bytes no walk looks into).
type Large struct {
	Type    string `cbor:"type"`
	Content Link   `cbor:"content"`
	Links   []Link `cbor:"links"`
}

// PutObject stores data, the canonical encoding of an object (of
// [Marshal]), through w: as one DAG-CBOR block when it fits in
// [MaxBlockSize], otherwise as a file under a [Large] envelope. It
// returns the CID to link, which [GetObject] reads back. The caller
// flushes w. The error wraps [ErrTooLarge] when even the envelope is
// over the limit (more than about 100,000 distinct links).
func PutObject(ctx context.Context, w *Writer, data []byte) (cid.Cid, error) {
	if len(data) <= MaxBlockSize {
		b := NewBlock(DagCBOR, data)
		return b.cid, w.Add(ctx, b)
	}
	links, ok := scanLinks(data)
	if !ok {
		return cid.Undef, fmt.Errorf("the links of an object of %d bytes cannot be read: %w", len(data), ErrInvalid)
	}
	env := Large{Type: TypeLarge, Links: distinctLinks(links)}
	// PutFile uses the store only when it has no writer of its own.
	root, _, err := PutFile(ctx, nil, bytes.NewReader(data), &PutOptions{Writer: w})
	if err != nil {
		return cid.Undef, err
	}
	env.Content = Link{root}
	enc, err := Marshal(&env)
	if err != nil {
		return cid.Undef, err
	}
	if len(enc) > MaxBlockSize {
		return cid.Undef, fmt.Errorf("an object of %d bytes with %d distinct links: its envelope of %d bytes is over the block limit of %d bytes: %w", len(data), len(env.Links), len(enc), MaxBlockSize, ErrTooLarge)
	}
	b := NewBlock(DagCBOR, enc)
	return b.cid, w.Add(ctx, b)
}

// GetObject decodes the object at c into v with [Unmarshal]: the block
// itself, or, when it is a [Large] envelope, the content of the file it
// links. An envelope is refused (the error wraps [ErrInvalid]) when its
// content would fit in a block, or when the links it lists are not
// exactly those of its content: a link the envelope did not list would
// be out of reach of every walk.
func GetObject(ctx context.Context, st BlockReader, c cid.Cid, v any) error {
	var env Large
	isLarge := false
	err := st.View(ctx, c, func(data []byte) error {
		if t, _ := TextEntry(data, "type"); t == TypeLarge {
			isLarge = true
			return Unmarshal(data, &env)
		}
		return Unmarshal(data, v)
	})
	if err != nil || !isLarge {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("envelope %s: %s: %w", c, fmt.Sprintf(format, args...), ErrInvalid)
	}
	var buf bytes.Buffer
	if _, err := ReadFile(ctx, st, env.Content.Cid, &buf, nil); err != nil {
		return fmt.Errorf("envelope %s: %w", c, err)
	}
	data := buf.Bytes()
	if len(data) <= MaxBlockSize {
		return bad("its content of %d bytes fits in a block", len(data))
	}
	links, ok := scanLinks(data)
	if !ok {
		return bad("the links of its content cannot be read")
	}
	if got := distinctLinks(links); !slices.EqualFunc(got, env.Links, func(a, b Link) bool { return a.Cid == b.Cid }) {
		return bad("it lists %d links where its content holds %d distinct ones, or other ones", len(env.Links), len(got))
	}
	return Unmarshal(data, v)
}

// ReadObjectBlocks reads every block of the object stored at c, as
// [GetObject] does (its block, and for an envelope every block of its
// content), each hashed as it is read, and decodes nothing but an
// envelope: for a caller that keeps the object decoded by its CID and
// must still find its blocks in st as they are now. A block missing or
// damaged is an error, as GetObject's.
func ReadObjectBlocks(ctx context.Context, st BlockReader, c cid.Cid) error {
	var content cid.Cid
	err := st.View(ctx, c, func(data []byte) error {
		if t, _ := TextEntry(data, "type"); t != TypeLarge {
			return nil
		}
		var env Large
		if err := Unmarshal(data, &env); err != nil {
			return err
		}
		content = env.Content.Cid
		return nil
	})
	if err != nil || !content.Defined() {
		return err
	}
	if _, err := ReadFile(ctx, st, content, io.Discard, nil); err != nil {
		return fmt.Errorf("envelope %s: %w", c, err)
	}
	return nil
}

// distinctLinks returns links without repeats, sorted by their bytes.
func distinctLinks(links []cid.Cid) []Link {
	slices.SortFunc(links, func(a, b cid.Cid) int { return strings.Compare(a.KeyString(), b.KeyString()) })
	links = slices.Compact(links)
	out := make([]Link, len(links))
	for i, l := range links {
		out[i] = Link{l}
	}
	return out
}
