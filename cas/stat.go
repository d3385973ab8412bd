package cas

import (
	"context"
	"fmt"
	"strings"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multicodec"
)

// Info describes a block and, for hg objects, what it stands for.
type Info struct {
	CID       cid.Cid `json:"-"`
	Codec     string  `json:"codec"`          // multicodec name: raw, dag-cbor, dag-pb...
	Type      string  `json:"type,omitempty"` // the object's "type" field, for hg objects
	BlockSize int     `json:"block_size"`     // bytes of this block alone
	Size      uint64  `json:"size"`           // content bytes: of the file, of all files in a tree, or of the block
	Links     int     `json:"links"`          // links held by this block
	Entries   int     `json:"entries,omitempty"`
}

// Stat reads and verifies block c and describes it. An hg/file@1 or
// hg/tree@1 must be canonical and well formed, else the error wraps
// [ErrNotCanonical] or [ErrInvalid].
func Stat(ctx context.Context, st BlockReader, c cid.Cid) (*Info, error) {
	info := &Info{CID: c, Codec: codecName(c.Type())}
	err := st.View(ctx, c, func(data []byte) error {
		info.BlockSize = len(data)
		info.Size = uint64(len(data))
		if c.Type() != DagCBOR {
			links, err := Links(c, data)
			info.Links = len(links)
			if c.Type() != Raw && err != nil {
				return nil // an opaque block: nothing more to say
			}
			return err
		}
		switch typ := objectType(data); typ {
		case TypeFile:
			var n FileNode
			if err := Unmarshal(data, &n); err != nil {
				return err
			}
			if err := n.check(c); err != nil {
				return err
			}
			info.Type, info.Size, info.Links = typ, n.Size, len(n.Links)
		case TypeTree:
			t, err := DecodeTree(data)
			if err != nil {
				return err
			}
			info.Type, info.Links, info.Entries = typ, len(t.Entries), len(t.Entries)
			info.Size = 0
			for _, e := range t.Entries {
				info.Size += e.Size
			}
		default:
			info.Type = typ
			links, err := Links(c, data)
			if err != nil {
				return err
			}
			info.Links = len(links)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// objectType returns the "type" field of a DAG-CBOR map if it names an hg
// object, else "". It reads leniently: a foreign block is not an error.
func objectType(data []byte) string {
	var v struct {
		Type string `cbor:"type"`
	}
	if err := walkMode.Unmarshal(data, &v); err != nil {
		return ""
	}
	if strings.HasPrefix(v.Type, "hg/") {
		return v.Type
	}
	return ""
}

func codecName(code uint64) string {
	if name := multicodec.Code(code).String(); !strings.HasPrefix(name, "Code(") {
		return name
	}
	return fmt.Sprintf("0x%x", code)
}

// CheckObject checks a DAG-CBOR block that claims, by its "type" field,
// to be an hg object this package defines (hg/file@1, hg/tree@1): it must
// decode strictly and be well formed. Blocks of other types pass.
func CheckObject(data []byte) error {
	switch objectType(data) {
	case TypeFile:
		var n FileNode
		if err := Unmarshal(data, &n); err != nil {
			return err
		}
		return n.check(Sum(DagCBOR, data))
	case TypeTree:
		_, err := DecodeTree(data)
		return err
	}
	return nil
}
