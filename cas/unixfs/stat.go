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
		z := sizer{ctx: ctx, st: st, memo: map[cid.Cid]uint64{}}
		if info.Size, err = z.dirSize(n, ents, 0); err != nil {
			return nil, err
		}
	}
	return info, nil
}

// sizer adds up the filesizes below directories, each distinct block
// once: a directory linked from many places (a DAG that repeats one
// subdirectory a thousand times at each of ten levels) costs one visit,
// not a visit per path to it.
type sizer struct {
	ctx  context.Context
	st   cas.BlockReader
	memo map[cid.Cid]uint64
}

// dirSize adds up the filesizes of the files below the directory n.
func (z *sizer) dirSize(n *Node, ents []Entry, depth int) (uint64, error) {
	if depth >= MaxDirDepth {
		return 0, fmt.Errorf("%s: directories nested deeper than %d: %w", n.CID, MaxDirDepth, cas.ErrInvalid)
	}
	var total uint64
	for _, e := range ents {
		size, ok := z.memo[e.CID]
		if !ok {
			var err error
			if size, err = z.size(n, e, depth); err != nil {
				return 0, err
			}
			z.memo[e.CID] = size
		}
		var carry uint64
		if total, carry = bits.Add64(total, size, 0); carry != 0 {
			return 0, fmt.Errorf("%s: sizes overflow 64 bits: %w", n.CID, cas.ErrInvalid)
		}
	}
	return total, nil
}

// size returns the filesize of the entry e of n, or the sum below it.
func (z *sizer) size(n *Node, e Entry, depth int) (uint64, error) {
	child, err := Load(z.ctx, z.st, e.CID)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", n.CID, e.Name, err)
	}
	switch {
	case child.IsFile():
		return child.FileSize(), nil
	case child.IsDir():
		sub, err := Entries(z.ctx, z.st, child)
		if err != nil {
			return 0, err
		}
		return z.dirSize(child, sub, depth+1)
	}
	return 0, nil
}
