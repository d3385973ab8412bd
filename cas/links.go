package cas

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-varint"
)

// Links returns the CIDs a block links to, in the order they appear.
// Raw blocks have none. DAG-CBOR blocks are read leniently (blocks made by
// other tools need not be canonical to be walked); dag-pb blocks are read
// for their PBLink hashes. For any other codec the error wraps [ErrInvalid]:
// a walk that cannot see a block's links must not pretend it has none.
//
// In DAG-CBOR a link is CBOR tag 42 and nothing else. Any other tag (a
// bignum, a date, a tag hg has never heard of) is not in the data model:
// the strict decoder refuses it, so no hg object (which must decode
// strictly: see [DecodeNode], [Unmarshal], and the import's check of every
// hg/ object) can hold one, and in a block made by another tool its
// content is opaque, never searched for links. A tag 42 inside another tag
// is neither followed nor skipped: following it would read as a link what
// DAG-CBOR does not, and skipping it would let gc delete a block the
// writer may have meant to keep, so the block's links are unreadable and
// the error wraps [ErrInvalid], as for an unknown codec (gc then removes
// nothing and an import is refused, naming the block).
func Links(c cid.Cid, data []byte) ([]cid.Cid, error) {
	switch c.Type() {
	case Raw:
		return nil, nil
	case DagCBOR:
		if links, ok := scanLinks(data); ok {
			return links, nil
		}
		// The full decoder reads what the scanner leaves, and names
		// what is wrong.
		var v any
		if err := walkMode.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("read links of %s: %w", c, err)
		}
		var out []cid.Cid
		if err := collectLinks(v, &out); err != nil {
			return nil, fmt.Errorf("read links of %s: %w", c, err)
		}
		return out, nil
	case DagPB:
		return pbLinks(c, data)
	default:
		return nil, fmt.Errorf("read links of %s: codec 0x%x: %w", c, c.Type(), ErrInvalid)
	}
}

// NewLinks is [Links] for a walk that has met some CIDs already: the
// links known reports (given each binary CID, as KeyString has it) are
// left out, without being parsed again. Only well-formed links are given
// to known, so a block whose links cannot be read still fails as in Links.
func NewLinks(c cid.Cid, data []byte, known func(raw []byte) bool) ([]cid.Cid, error) {
	if c.Type() == DagCBOR {
		s := linkScanner{data: data, known: known}
		if s.item(0) && s.pos == len(data) {
			return s.out, nil
		}
	}
	links, err := Links(c, data)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(links, func(l cid.Cid) bool { return known([]byte(l.KeyString())) }), nil
}

func collectLinks(v any, out *[]cid.Cid) error {
	switch x := v.(type) {
	case cbor.Tag:
		if x.Number != linkTag {
			// Opaque (see Links), unless it hides a tag 42.
			if holdsLinkTag(x.Content) {
				return fmt.Errorf("tag %d encloses a link (tag 42): DAG-CBOR has links only outside every other tag: %w", x.Number, ErrInvalid)
			}
			return nil
		}
		b, ok := x.Content.([]byte)
		if !ok {
			return fmt.Errorf("tag 42 must enclose a byte string: %w", ErrInvalid)
		}
		l, err := linkFromBytes(b)
		if err != nil {
			return err
		}
		*out = append(*out, l)
	case []any:
		for _, e := range x {
			if err := collectLinks(e, out); err != nil {
				return err
			}
		}
	case map[string]any:
		// Go maps have no order: visit the keys in DAG-CBOR's canonical
		// order (length first, then bytewise), which is the order they
		// appear in in a canonical block.
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			if len(a) != len(b) {
				return len(a) - len(b)
			}
			return strings.Compare(a, b)
		})
		for _, k := range keys {
			if err := collectLinks(x[k], out); err != nil {
				return err
			}
		}
	}
	return nil
}

// holdsLinkTag reports whether v, as the lenient decoder produced it,
// holds a tag 42 at any depth.
func holdsLinkTag(v any) bool {
	switch x := v.(type) {
	case cbor.Tag:
		return x.Number == linkTag || holdsLinkTag(x.Content)
	case []any:
		return slices.ContainsFunc(x, holdsLinkTag)
	case map[string]any:
		for _, e := range x {
			if holdsLinkTag(e) {
				return true
			}
		}
	}
	return false
}

// pbLinks reads the Hash field of every Links entry (field 2) of a dag-pb
// PBNode, skipping everything else.
func pbLinks(c cid.Cid, data []byte) ([]cid.Cid, error) {
	bad := func(what string) error {
		return fmt.Errorf("read links of %s: dag-pb %s: %w", c, what, ErrInvalid)
	}
	var out []cid.Cid
	for len(data) > 0 {
		key, n, err := varint.FromUvarint(data)
		if err != nil {
			return nil, bad("field key")
		}
		data = data[n:]
		field, wire := key>>3, key&7
		if wire != 2 {
			return nil, bad("wire type")
		}
		size, n, err := varint.FromUvarint(data)
		if err != nil || size > uint64(len(data)-n) {
			return nil, bad("length")
		}
		body := data[n : n+int(size)]
		data = data[n+int(size):]
		if field != 2 {
			continue
		}
		for len(body) > 0 {
			k, m, err := varint.FromUvarint(body)
			if err != nil {
				return nil, bad("link field key")
			}
			body = body[m:]
			f, w := k>>3, k&7
			switch w {
			case 0:
				_, m, err = varint.FromUvarint(body)
				if err != nil {
					return nil, bad("link varint")
				}
				body = body[m:]
			case 2:
				sz, m, err := varint.FromUvarint(body)
				if err != nil || sz > uint64(len(body)-m) {
					return nil, bad("link length")
				}
				if f == 1 {
					l, err := CastCID(body[m : m+int(sz)])
					if err != nil {
						return nil, err
					}
					out = append(out, l)
				}
				body = body[m+int(sz):]
			default:
				return nil, bad("link wire type")
			}
		}
	}
	return out, nil
}
