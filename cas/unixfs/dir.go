package unixfs

import (
	"context"
	"fmt"
	"math/bits"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	"github.com/spaolacci/murmur3"
)

// Entry is one name in a UnixFS directory.
type Entry struct {
	Name  string
	CID   cid.Cid
	Tsize uint64 // as the link declares it; not checked
}

// Entries returns the entries of the directory n, plain or HAMT-sharded,
// in the order the blocks hold them. Every name must be a single safe
// path element ([cas.CheckName]: not empty, ".", "..", no "/", "\" or
// NUL, valid UTF-8) and appear once in the whole directory; a HAMT shard's
// entries must sit in the bucket their name's murmur3 hash selects, and
// its links must name their buckets in rising order. Anything else is an
// error wrapping [cas.ErrInvalid] that names the directory.
func Entries(ctx context.Context, st cas.BlockReader, n *Node) ([]Entry, error) {
	if !n.IsDir() {
		return nil, fmt.Errorf("%s is a UnixFS %s, not a directory: %w", n.CID, n.Type(), cas.ErrInvalid)
	}
	var out []Entry
	if n.FS.Type == TypeDirectory {
		for _, l := range n.PB.Links {
			out = append(out, Entry{Name: l.Name, CID: l.Hash, Tsize: l.Tsize})
		}
	} else if err := hamtEntries(ctx, st, n, n, nil, &out); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(out))
	for _, e := range out {
		if err := cas.CheckName(e.Name); err != nil {
			return nil, fmt.Errorf("directory %s: %w", n.CID, err)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("directory %s: entry %q appears twice: %w", n.CID, e.Name, cas.ErrInvalid)
		}
		seen[e.Name] = true
	}
	return out, nil
}

// shardLink is a link of a HAMT shard: its bucket, and the entry name it
// holds ("" for a sub-shard).
type shardLink struct {
	bucket uint64
	name   string
	sub    bool
	link   PBLink
}

// shardLinks reads the links of the shard s: each name must start with
// its bucket in upper-case hex, padded to the width of the fanout's
// largest bucket, and the buckets must be those the bitfield sets, in
// rising order.
func shardLinks(s *Node) (width int, links []shardLink, err error) {
	fanout := s.FS.Fanout
	width = bits.TrailingZeros64(fanout) // bits of the hash per level
	pad := len(fmt.Sprintf("%X", fanout-1))
	buckets := setBits(s.FS.Data, fanout)
	for i, l := range s.PB.Links {
		if len(l.Name) < pad {
			return 0, nil, fmt.Errorf("HAMT shard %s: link %q has no bucket prefix: %w", s.CID, l.Name, cas.ErrInvalid)
		}
		var bucket uint64
		if _, err := fmt.Sscanf(l.Name[:pad], "%X", &bucket); err != nil || fmt.Sprintf("%0*X", pad, bucket) != l.Name[:pad] {
			return 0, nil, fmt.Errorf("HAMT shard %s: link %q has a bad bucket prefix: %w", s.CID, l.Name, cas.ErrInvalid)
		}
		if bucket != buckets[i] {
			return 0, nil, fmt.Errorf("HAMT shard %s: link %q is in bucket %d where the bitfield says %d: %w", s.CID, l.Name, bucket, buckets[i], cas.ErrInvalid)
		}
		links = append(links, shardLink{bucket: bucket, name: l.Name[pad:], sub: len(l.Name) == pad, link: l})
	}
	return width, links, nil
}

// loadShard loads the sub-shard l of s, which must be a HAMT shard of
// the root's fanout, depth levels below the root.
func loadShard(ctx context.Context, st cas.BlockReader, root, s *Node, l shardLink, depth int) (*Node, error) {
	child, err := Load(ctx, st, l.link.Hash)
	if err != nil {
		return nil, fmt.Errorf("HAMT shard %s: %w", s.CID, err)
	}
	if child.Type() != TypeHAMTShard {
		return nil, fmt.Errorf("HAMT shard %s: link %q is a %s, not a shard: %w", s.CID, l.link.Name, child.Type(), cas.ErrInvalid)
	}
	if len(child.PB.Links) == 0 {
		return nil, fmt.Errorf("HAMT shard %s: an empty shard below the root: %w", child.CID, cas.ErrInvalid)
	}
	if child.FS.Fanout != root.FS.Fanout {
		return nil, fmt.Errorf("HAMT shard %s: fanout %d under a root of %d: %w", child.CID, child.FS.Fanout, root.FS.Fanout, cas.ErrInvalid)
	}
	if (depth+1)*bits.TrailingZeros64(child.FS.Fanout) > 64 {
		return nil, fmt.Errorf("HAMT shard %s: deeper than a 64-bit hash allows: %w", child.CID, cas.ErrInvalid)
	}
	return child, nil
}

// hamtEntries appends the entries of the shard s to out. path holds the
// buckets that lead to s from the root, one a level. Each entry is
// checked as soon as it is met: its name's hash must select the bucket it
// sits in at every level, so a shard block linked from two buckets (a
// DAG that would list one shard many times over) fails at its second
// use, not after a walk of everything below it.
func hamtEntries(ctx context.Context, st cas.BlockReader, root, s *Node, path []uint64, out *[]Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	width, links, err := shardLinks(s)
	if err != nil {
		return err
	}
	depth := len(path)
	for _, l := range links {
		here := append(path[:depth:depth], l.bucket)
		if l.sub {
			child, err := loadShard(ctx, st, root, s, l, depth+1)
			if err != nil {
				return err
			}
			if err := hamtEntries(ctx, st, root, child, here, out); err != nil {
				return err
			}
			continue
		}
		h := hamtHash(l.name)
		for d, want := range here {
			if bucketAt(h, d, width) != want {
				return fmt.Errorf("HAMT shard %s: entry %q is in bucket %d at level %d, not where its hash puts it: %w", s.CID, l.name, want, d, cas.ErrInvalid)
			}
		}
		*out = append(*out, Entry{Name: l.name, CID: l.link.Hash, Tsize: l.link.Tsize})
	}
	return nil
}

// hamtLookup finds name in the shard s as kubo does: by the bucket its
// hash selects at each level, reading one shard a level.
func hamtLookup(ctx context.Context, st cas.BlockReader, root, s *Node, depth int, name string) (Entry, bool, error) {
	width, links, err := shardLinks(s)
	if err != nil {
		return Entry{}, false, err
	}
	bucket := hamtBucket(name, depth, width)
	for _, l := range links {
		if l.bucket != bucket {
			continue
		}
		if l.sub {
			child, err := loadShard(ctx, st, root, s, l, depth+1)
			if err != nil {
				return Entry{}, false, err
			}
			return hamtLookup(ctx, st, root, child, depth+1, name)
		}
		if l.name == name {
			return Entry{Name: name, CID: l.link.Hash, Tsize: l.link.Tsize}, true, nil
		}
	}
	return Entry{}, false, nil
}

// setBits returns the indexes of the bits set in a HAMT bitfield (a
// big-endian number, bit 0 the last byte's lowest), lowest first.
func setBits(field []byte, fanout uint64) []uint64 {
	var out []uint64
	for i := uint64(0); i < fanout; i++ {
		byteIdx := len(field) - 1 - int(i/8)
		if byteIdx < 0 {
			break
		}
		if field[byteIdx]&(1<<(i%8)) != 0 {
			out = append(out, i)
		}
	}
	return out
}

// hamtHash returns the murmur3-x64-64 hash of name, as kubo's HAMT
// takes it: the first 64 bits of murmur3's x64 128-bit hash.
func hamtHash(name string) uint64 {
	h := murmur3.New64()
	h.Write([]byte(name))
	return h.Sum64()
}

// bucketAt returns the bucket a hash selects at depth: the depth'th run of
// width bits, most significant first.
func bucketAt(h uint64, depth, width int) uint64 {
	return (h >> uint(64-(depth+1)*width)) & (1<<uint(width) - 1)
}

// hamtBucket returns the bucket of name at depth.
func hamtBucket(name string, depth, width int) uint64 {
	return bucketAt(hamtHash(name), depth, width)
}

// Lookup returns the entry name of the directory n, or an error wrapping
// [cas.ErrNotFound] that names it. A plain directory is read and checked
// whole, as [Entries] does; a HAMT-sharded one is searched as kubo
// searches it, one shard a level along the buckets name's hash selects,
// each shard checked as it is read.
func Lookup(ctx context.Context, st cas.BlockReader, n *Node, name string) (Entry, error) {
	notFound := fmt.Errorf("directory %s has no entry %q: %w", n.CID, strings.ToValidUTF8(name, "\uFFFD"), cas.ErrNotFound)
	if n.IsDir() && n.FS.Type == TypeHAMTShard {
		if err := cas.CheckName(name); err != nil {
			return Entry{}, notFound
		}
		e, ok, err := hamtLookup(ctx, st, n, n, 0, name)
		if err != nil {
			return Entry{}, err
		}
		if !ok {
			return Entry{}, notFound
		}
		return e, nil
	}
	ents, err := Entries(ctx, st, n)
	if err != nil {
		return Entry{}, err
	}
	for _, e := range ents {
		if e.Name == name {
			return e, nil
		}
	}
	return Entry{}, notFound
}
