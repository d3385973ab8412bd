package verify

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// blockProblem says whether err is about the data (a missing, corrupt,
// non-canonical or invalid block) rather than the store, and why.
func blockProblem(err error) (string, bool) {
	var nf *cas.NotFoundError
	var ce *cas.CorruptError
	switch {
	case errors.As(err, &nf):
		return "missing", true
	case errors.As(err, &ce):
		if ce.Got.Defined() {
			return "corrupt: its bytes hash to " + ce.Got.String(), true
		}
		return "corrupt", true
	case errors.Is(err, cas.ErrNotFound):
		return "missing", true
	case errors.Is(err, cas.ErrCorrupt):
		return "corrupt", true
	case errors.Is(err, cas.ErrNotCanonical), errors.Is(err, cas.ErrInvalid),
		errors.Is(err, cas.ErrBadCID), errors.Is(err, cas.ErrTooLarge):
		return err.Error(), true
	}
	return "", false
}

// walk visits the closure of root like [cas.Walk], verifying every block
// (raw ones included), but records a bad block and goes on instead of
// stopping, so that every bad block is named.
func (vr *verifier) walk(root cid.Cid, skip map[cid.Cid]bool) error {
	// Each entry carries the block that linked it, for the messages. A
	// CID goes on the stack once, when it is first met; the links of
	// the blocks read next leave out what has been met, unparsed.
	type entry struct{ c, parent cid.Cid }
	var met cidSet
	met.add(root)
	known := func(raw []byte) bool { return met.hasKey(raw) }
	stack := make([]entry, 1, 32)
	stack[0] = entry{c: root}
	blocks := 0
	for len(stack) > 0 {
		if err := vr.ctx.Err(); err != nil {
			return err
		}
		e := stack[len(stack)-1]
		c := e.c
		stack = stack[:len(stack)-1]
		if (skip[c] || vr.known[c]) && c != root {
			continue
		}
		blocks++
		markBad := func(why string) {
			if e.parent.Defined() {
				why += " (linked from " + e.parent.String() + ")"
			}
			vr.markBad(c, why)
		}
		if err := cas.CheckHash(c); err != nil {
			markBad("its hash function cannot be checked: " + err.Error())
			continue
		}
		if why, ok := vr.bad[c]; ok {
			markBad(why) // found by the decoding; now with its parent
			continue
		}
		links, decoded := vr.linksOf[c]
		var linkErr error
		var err error
		if !decoded {
			err = vr.st.View(vr.ctx, c, func(data []byte) error {
				links, linkErr = cas.NewLinks(c, data, known)
				return nil
			})
		}
		if err != nil {
			if cerr := vr.ctx.Err(); cerr != nil {
				return cerr
			}
			why, ok := blockProblem(err)
			if !ok {
				return fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
			}
			markBad(why)
			continue
		}
		if linkErr != nil {
			markBad("its links cannot be read: " + linkErr.Error())
			continue
		}
		for i := len(links) - 1; i >= 0; i-- {
			if !met.has(links[i]) { // a block may link the same CID twice
				met.add(links[i])
				stack = append(stack, entry{links[i], c})
			}
		}
	}
	vr.v.Blocks = blocks
	return nil
}

func (vr *verifier) markBad(c cid.Cid, why string) {
	if _, ok := vr.bad[c]; !ok {
		vr.badOrder = append(vr.badOrder, c)
	}
	vr.bad[c] = why
}

// upstreamOf returns the upstream receipts the receipt's input packet
// records, as far as they can be read; the walk reports what cannot. The
// objects it decodes are kept for the checks that follow.
func (vr *verifier) upstreamOf(rc cid.Cid) (map[cid.Cid]bool, error) {
	var r ledger.Receipt
	var in ledger.Packet
	if ok, err := vr.object(rc, "receipt", ledger.TypeReceipt, &r); !ok || err != nil {
		return nil, err
	}
	if ok, err := vr.object(r.Input.Cid, "input packet", ledger.TypePacket, &in); !ok || err != nil {
		return nil, err
	}
	out := map[cid.Cid]bool{}
	for _, u := range in.Upstream {
		out[u.Cid] = true
	}
	return out, nil
}

// object reads and strictly decodes the typed object c into v (a pointer)
// and checks its type. It returns false, with the reason noted under
// "canonical form", when it cannot; err is only for the store or ctx.
func (vr *verifier) object(c cid.Cid, what, typ string, v any) (bool, error) {
	if prev, ok := vr.decoded[c]; ok {
		// Copy the cached value into v when the types agree.
		if copyInto(prev, v) {
			return true, nil
		}
	}
	if vr.undecodable[c] {
		return false, nil
	}
	ok, err := vr.decode(c, what, typ, v, false)
	if err != nil {
		return false, err
	}
	if !ok {
		vr.undecodable[c] = true
		return false, nil
	}
	vr.decoded[c] = v
	delete(vr.checked, c)
	return true, nil
}

// keepLinks records the links of c, a block that has decoded, for the
// walk, and the CIDs among them for the decoding of the blocks after it.
func (vr *verifier) keepLinks(c cid.Cid, links []cid.Cid) {
	if vr.linksOf == nil {
		vr.linksOf = make(map[cid.Cid][]cid.Cid, 16)
	}
	vr.linksOf[c] = links
	for _, l := range links {
		vr.cids.add(l)
	}
}

// checkObject is object for a typed object whose validity and type
// matter but not its content (the packets between steps): the block is
// checked as [cas.Unmarshal] would accept it, without building the value.
// v is only the type to check against.
func (vr *verifier) checkObject(c cid.Cid, what, typ string, v any) error {
	if prev, ok := vr.decoded[c]; (ok && ledger.TypeOf(prev) == typ) || vr.undecodable[c] || vr.checked[c] {
		return nil
	}
	ok, err := vr.decode(c, what, typ, v, true)
	if err != nil {
		return err
	}
	if !ok {
		vr.undecodable[c] = true
		return nil
	}
	if vr.checked == nil {
		vr.checked = map[cid.Cid]bool{}
	}
	vr.checked[c] = true
	return nil
}

// decode reads c into v, or only checks that it would, and its type.
func (vr *verifier) decode(c cid.Cid, what, typ string, v any, checkOnly bool) (bool, error) {
	if why, ok := vr.bad[c]; ok {
		vr.canon.add("%s %s cannot be read: %s", what, c, why)
		return false, nil
	}
	if c.Type() != cas.DagCBOR {
		vr.canon.add("%s %s is not DAG-CBOR (codec 0x%x)", what, c, c.Type())
		return false, nil
	}
	var decodeErr error
	var got string
	err := vr.st.View(vr.ctx, c, func(data []byte) error {
		var links []cid.Cid
		if checkOnly {
			links, decodeErr = vr.dec.CheckLinks(data, v)
			got, _ = cas.TextEntry(data, "type")
		} else {
			links, decodeErr = vr.dec.UnmarshalLinks(data, v)
			got = ledger.TypeOf(v)
		}
		if decodeErr == nil {
			vr.keepLinks(c, links)
		}
		if checkOnly {
			return nil
		}
		if decodeErr == nil && c == vr.v.Receipt && !vr.cache.sigs.ReceiptSigned(c) {
			// Kept for the signature check, which cuts its signing
			// bytes from the block instead of encoding them again.
			vr.receiptData = bytes.Clone(data)
		}
		return nil
	})
	if err != nil {
		if cerr := vr.ctx.Err(); cerr != nil {
			return false, cerr
		}
		why, ok := blockProblem(err)
		if !ok {
			return false, fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
		}
		vr.markBad(c, why)
		vr.canon.add("%s %s cannot be read: %s", what, c, why)
		return false, nil
	}
	if decodeErr != nil {
		vr.canon.add("%s %s: %v", what, c, decodeErr)
		return false, nil
	}
	if got != typ {
		vr.canon.add("%s %s is a %q, not %s", what, c, got, typ)
		return false, nil
	}
	return true, nil
}

// copyInto copies the object src points at into dst, when both point at
// the same type.
func copyInto(src, dst any) bool {
	d, v := reflect.ValueOf(dst), reflect.ValueOf(src)
	if d.Kind() != reflect.Pointer || v.Type() != d.Type() || d.IsNil() || v.IsNil() {
		return false
	}
	d.Elem().Set(v.Elem())
	return true
}

// node reads and strictly decodes an untyped object whose "type" must be
// typ (the permission snapshot).
func (vr *verifier) node(c cid.Cid, what, typ string) error {
	if prev, ok := vr.decoded[c]; ok {
		// The same block may be linked many times (one snapshot for the
		// receipt and every transition), but it is a snapshot only if
		// it was read as one: a typed object, such as the input packet,
		// is not.
		if m, isNode := prev.(map[string]any); !isNode || m["type"] != typ {
			if !vr.misread[c] {
				vr.canon.add("%s %s is not an %s object", what, c, typ)
				vr.misread[c] = true
			}
		}
		return nil
	}
	if vr.undecodable[c] {
		return nil
	}
	if why, ok := vr.bad[c]; ok {
		vr.canon.add("%s %s cannot be read: %s", what, c, why)
		vr.undecodable[c] = true
		return nil
	}
	if vr.sharedNodes != nil {
		if n, ok := vr.sharedNodes.Load(c); ok {
			if m, ok := n.(map[string]any); ok && m["type"] == typ {
				vr.decoded[c] = n
				return nil
			}
		}
	}
	var n any
	var decodeErr error
	err := vr.st.View(vr.ctx, c, func(data []byte) error {
		n, decodeErr = cas.DecodeNode(data)
		return nil
	})
	if err != nil {
		if cerr := vr.ctx.Err(); cerr != nil {
			return cerr
		}
		why, ok := blockProblem(err)
		if !ok {
			return fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
		}
		vr.markBad(c, why)
		decodeErr = errors.New("cannot be read: " + why)
	}
	if decodeErr == nil {
		if m, ok := n.(map[string]any); !ok || m["type"] != typ {
			decodeErr = fmt.Errorf("is not an %s object", typ)
		}
	}
	if decodeErr != nil {
		vr.canon.add("%s %s: %v", what, c, decodeErr)
		vr.undecodable[c] = true
		return nil
	}
	vr.decoded[c] = n
	if vr.sharedNodes != nil {
		vr.sharedNodes.Store(c, n)
	}
	return nil
}
