package unixfs

import (
	"fmt"
	"unicode/utf8"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	"google.golang.org/protobuf/encoding/protowire"
)

// PBNode is a dag-pb block: an ordered list of links and optional data.
type PBNode struct {
	Links   []PBLink
	Data    []byte // nil when the block has no Data field
	HasData bool   // whether the Data field is present (it may be empty)
}

// PBLink is one link of a [PBNode]. Name and Tsize are optional in the
// format; HasName and HasTsize say whether the block holds them.
type PBLink struct {
	Hash     cid.Cid
	Name     string
	HasName  bool
	Tsize    uint64
	HasTsize bool
}

// Protobuf field numbers of the dag-pb schema.
const (
	pbNodeData  = 1
	pbNodeLinks = 2
	pbLinkHash  = 1
	pbLinkName  = 2
	pbLinkTsize = 3
)

// DecodePBNode decodes a dag-pb block strictly, as the dag-pb
// specification asks of a decoder that wants the canonical form: only the
// fields and wire types of the schema, PBLink fields in field-number
// order and none twice, the links as one run either before or after a
// single Data field, every Hash present and a CID, varints in their
// shortest form. Link order is not checked: the specification says a
// decoder keeps the order it finds. Errors wrap [ErrMalformed].
func DecodePBNode(data []byte) (*PBNode, error) {
	n := &PBNode{}
	linksDone := false // a run of links ended (Data came after it)
	for off := 0; off < len(data); {
		num, typ, tl := protowire.ConsumeTag(data[off:])
		if tl < 0 {
			return nil, pbErr(off, "bad field tag")
		}
		if err := shortest(data[off:], tl); err != nil {
			return nil, pbErr(off, "field tag: %v", err)
		}
		if typ != protowire.BytesType {
			return nil, pbErr(off, "field %d has wire type %d, want 2", num, typ)
		}
		body, bl := protowire.ConsumeBytes(data[off+tl:])
		if bl < 0 {
			return nil, pbErr(off, "field %d: bad length", num)
		}
		if bl-len(body) != protowire.SizeVarint(uint64(len(body))) {
			return nil, pbErr(off, "field %d: length varint not in its shortest form", num)
		}
		switch num {
		case pbNodeData:
			if n.HasData {
				return nil, pbErr(off, "Data appears twice")
			}
			n.Data, n.HasData = body, true
			linksDone = len(n.Links) > 0
		case pbNodeLinks:
			if linksDone {
				return nil, pbErr(off, "Links interleaved with Data")
			}
			l, err := decodePBLink(body)
			if err != nil {
				return nil, pbErr(off, "link %d: %v", len(n.Links), err)
			}
			n.Links = append(n.Links, l)
		default:
			return nil, pbErr(off, "unknown field %d", num)
		}
		off += tl + bl
	}
	return n, nil
}

func decodePBLink(data []byte) (PBLink, error) {
	var l PBLink
	last := protowire.Number(0)
	for off := 0; off < len(data); {
		num, typ, tl := protowire.ConsumeTag(data[off:])
		if tl < 0 {
			return l, fmt.Errorf("bad field tag")
		}
		if err := shortest(data[off:], tl); err != nil {
			return l, err
		}
		if num <= last {
			return l, fmt.Errorf("field %d out of order or repeated", num)
		}
		last = num
		var fl int
		switch {
		case num == pbLinkHash && typ == protowire.BytesType, num == pbLinkName && typ == protowire.BytesType:
			var body []byte
			body, fl = protowire.ConsumeBytes(data[off+tl:])
			if fl < 0 {
				return l, fmt.Errorf("field %d: bad length", num)
			}
			if fl-len(body) != protowire.SizeVarint(uint64(len(body))) {
				return l, fmt.Errorf("field %d: length varint not in its shortest form", num)
			}
			if num == pbLinkHash {
				c, err := cas.CastCID(body)
				if err != nil {
					return l, fmt.Errorf("Hash: %w", err)
				}
				l.Hash = c
			} else {
				if !utf8.Valid(body) {
					return l, fmt.Errorf("Name is not valid UTF-8")
				}
				l.Name, l.HasName = string(body), true
			}
		case num == pbLinkTsize && typ == protowire.VarintType:
			l.Tsize, fl = protowire.ConsumeVarint(data[off+tl:])
			if fl < 0 {
				return l, fmt.Errorf("Tsize: bad varint")
			}
			if fl != protowire.SizeVarint(l.Tsize) {
				return l, fmt.Errorf("Tsize: varint not in its shortest form")
			}
			l.HasTsize = true
		default:
			return l, fmt.Errorf("unknown field %d of wire type %d", num, typ)
		}
		off += tl + fl
	}
	if !l.Hash.Defined() {
		return l, fmt.Errorf("no Hash")
	}
	return l, nil
}

// shortest checks that the varint at the start of b, n bytes long, has
// no redundant high zero bytes: protobuf reads 0x80 0x00 as 0, but a
// block so written is not the canonical form of its value.
func shortest(b []byte, n int) error {
	if n > 1 && b[n-1] == 0 {
		return fmt.Errorf("varint not in its shortest form")
	}
	return nil
}

func pbErr(off int, format string, args ...any) error {
	return fmt.Errorf("byte %d: %s: %w", off, fmt.Sprintf(format, args...), ErrMalformed)
}

// Value returns n in the IPLD data model as the dag-pb specification
// shapes it and kubo's 'ipfs dag get' prints it: a map of "Links" (always
// present, a list of maps with "Hash" and, when the block holds them,
// "Name" and "Tsize") and "Data" when the block holds it. [cas.EncodeJSON]
// writes it as DAG-JSON.
func (n *PBNode) Value() map[string]any {
	links := make([]any, len(n.Links))
	for i, l := range n.Links {
		m := map[string]any{"Hash": l.Hash}
		if l.HasName {
			m["Name"] = l.Name
		}
		if l.HasTsize {
			m["Tsize"] = l.Tsize
		}
		links[i] = m
	}
	v := map[string]any{"Links": links}
	if n.HasData {
		v["Data"] = append([]byte{}, n.Data...)
	}
	return v
}

// Encode returns n in the form [DecodePBNode] reads back to the same
// node and kubo writes: each link (Hash, then Name and Tsize when
// present) in order, then Data when present. hg writes no UnixFS; Encode
// is for tests and for checking a decoded block.
func (n *PBNode) Encode() []byte {
	var out []byte
	for _, l := range n.Links {
		var b []byte
		b = protowire.AppendTag(b, pbLinkHash, protowire.BytesType)
		b = protowire.AppendBytes(b, l.Hash.Bytes())
		if l.HasName {
			b = protowire.AppendTag(b, pbLinkName, protowire.BytesType)
			b = protowire.AppendString(b, l.Name)
		}
		if l.HasTsize {
			b = protowire.AppendTag(b, pbLinkTsize, protowire.VarintType)
			b = protowire.AppendVarint(b, l.Tsize)
		}
		out = protowire.AppendTag(out, pbNodeLinks, protowire.BytesType)
		out = protowire.AppendBytes(out, b)
	}
	if n.HasData {
		out = protowire.AppendTag(out, pbNodeData, protowire.BytesType)
		out = protowire.AppendBytes(out, n.Data)
	}
	return out
}
