package unixfs

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Stat describes the UnixFS node c as 'hg stat' shows it. Type is
// "unixfs/" and the node's type (file, raw, directory, hamt-shard,
// symlink); a raw block is a plain raw block, not described here. Size is
// a file's filesize, as its root declares it (and [ReadFile] enforces), a
// symlink's target length, or for a directory the sum of the filesizes of
// every file below it, read from the root node of each (the directories
// and file roots below are read, not the files' content). Entries counts
// a directory's entries, the shards of a HAMT included.
func Stat(ctx context.Context, st cas.BlockReader, c cid.Cid) (*cas.Info, error) {
	n, err := Load(ctx, st, c)
	if err != nil {
		return nil, err
	}
	info := &cas.Info{CID: c, Codec: "dag-pb", BlockSize: n.Size, Type: "unixfs/" + n.Type().String()}
	if n.FS == nil {
		info.Codec, info.Type = "raw", ""
		info.Size = uint64(len(n.Raw))
		return info, nil
	}
	info.Links = len(n.PB.Links)
	switch {
	case n.IsFile():
		info.Size = n.FileSize()
	case n.Type() == TypeSymlink:
		info.Size = uint64(len(n.FS.Data))
	case n.IsDir():
		ents, err := Entries(ctx, st, n)
		if err != nil {
			return nil, err
		}
		info.Entries = len(ents)
		if info.Size, err = dirSize(ctx, st, n, ents, 0); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// dirSize adds up the filesizes of the files below the directory n.
func dirSize(ctx context.Context, st cas.BlockReader, n *Node, ents []Entry, depth int) (uint64, error) {
	if depth >= MaxDirDepth {
		return 0, fmt.Errorf("%s: directories nested deeper than %d: %w", n.CID, MaxDirDepth, cas.ErrInvalid)
	}
	var total uint64
	for _, e := range ents {
		child, err := Load(ctx, st, e.CID)
		if err != nil {
			return 0, fmt.Errorf("%s/%s: %w", n.CID, e.Name, err)
		}
		var size uint64
		switch {
		case child.IsFile():
			size = child.FileSize()
		case child.IsDir():
			sub, err := Entries(ctx, st, child)
			if err != nil {
				return 0, err
			}
			if size, err = dirSize(ctx, st, child, sub, depth+1); err != nil {
				return 0, err
			}
		}
		var carry uint64
		if total, carry = bits.Add64(total, size, 0); carry != 0 {
			return 0, fmt.Errorf("%s: sizes overflow 64 bits: %w", n.CID, cas.ErrInvalid)
		}
	}
	return total, nil
}
