package unixfs

import (
	"context"
	"errors"
	"fmt"
	"math/bits"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// Sentinel errors of the package; errors returned also wrap the cas
// sentinels ([cas.ErrInvalid], [cas.ErrNotFound], [cas.ErrCorrupt]) that
// apply.
var (
	// ErrUnsupported is returned for a UnixFS node hg does not read: a
	// Metadata node, or a HAMT shard with a hash function other than
	// murmur3-x64-64.
	ErrUnsupported = errors.New("not supported")

	// ErrMalformed is returned for a dag-pb block that does not decode
	// strictly ([DecodePBNode]): the dag-pb counterpart of a DAG-CBOR
	// block that is not canonical.
	ErrMalformed = errors.New("malformed dag-pb")

	// ErrNotUnixFS is returned for a block that is neither dag-pb nor raw,
	// or a dag-pb block whose Data is not a UnixFS message.
	ErrNotUnixFS = errors.New("not a UnixFS node")
)

// Bounds on what a walk accepts, whatever the blocks declare.
const (
	// MaxFileDepth bounds the height of a file's tree of nodes. kubo's
	// balanced layout of 174 links a node reaches exabytes in 8 levels.
	MaxFileDepth = 64
	// MaxDirDepth bounds the nesting of directories (Linux's PATH_MAX of
	// 4096 bytes cannot hold more than 2048 names).
	MaxDirDepth = 2048
	// MaxSymlinkTarget bounds a symlink's target: Linux's PATH_MAX less
	// its NUL. A longer one could not be created, and would cost its
	// length again for every entry that links it.
	MaxSymlinkTarget = 4095
	// MaxFanout bounds a HAMT shard's fanout; kubo writes 256.
	MaxFanout = 1 << 16
)

// hashMurmur3 is the multihash code of murmur3-x64-64, the only hash of
// HAMT shards kubo writes.
const hashMurmur3 = 0x22

// Node is one UnixFS node: a dag-pb block with its Data decoded, or a
// raw block, which is a file of its bytes.
type Node struct {
	CID  cid.Cid
	PB   *PBNode // nil for a raw block
	FS   *Data   // nil for a raw block
	Raw  []byte  // a raw block's bytes (nil for dag-pb)
	Size int     // the block's length
}

// Type returns the node's UnixFS type; a raw block is a file.
func (n *Node) Type() DataType {
	if n.FS == nil {
		return TypeFile
	}
	return n.FS.Type
}

// IsDir reports whether n is a directory, plain or sharded.
func (n *Node) IsDir() bool {
	return n.FS != nil && (n.FS.Type == TypeDirectory || n.FS.Type == TypeHAMTShard)
}

// IsFile reports whether n holds file content (raw block, File or Raw).
func (n *Node) IsFile() bool {
	return n.FS == nil || n.FS.Type == TypeFile || n.FS.Type == TypeRaw
}

// FileSize returns the content bytes n declares: a raw block's length,
// else its Data plus its blocksizes (equal to filesize, when the node
// gives one: [Load] checks).
func (n *Node) FileSize() uint64 {
	if n.FS == nil {
		return uint64(len(n.Raw))
	}
	s := uint64(len(n.FS.Data))
	for _, b := range n.FS.Blocksizes {
		s += b
	}
	return s
}

// Load reads block c (verified against its hash by st), decodes it as a
// UnixFS node and checks it on its own: a file's blocksizes match its
// links and add up to its filesize; a directory holds no file data; a
// symlink has no links; a HAMT shard has a murmur3 hash, a power-of-two
// fanout and as many links as its bitfield has bits set (the names are
// [Entries]' to check). A missing block is an error naming it (wrapping
// [cas.ErrNotFound]); a dag-pb block that is not UnixFS wraps
// [ErrNotUnixFS], one that does not decode strictly [ErrMalformed].
func Load(ctx context.Context, st cas.BlockReader, c cid.Cid) (*Node, error) {
	n := &Node{CID: c}
	switch c.Type() {
	case cas.Raw:
		err := st.View(ctx, c, func(data []byte) error {
			n.Raw = append([]byte{}, data...)
			n.Size = len(data)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return n, nil
	case cas.DagPB:
	default:
		return nil, fmt.Errorf("%s: codec 0x%x: %w", c, c.Type(), ErrNotUnixFS)
	}
	err := st.View(ctx, c, func(data []byte) error {
		n.Size = len(data)
		pb, err := DecodePBNode(data)
		if err != nil {
			return err
		}
		if !pb.HasData {
			return fmt.Errorf("dag-pb node without Data: %w", ErrNotUnixFS)
		}
		// Copy out of the store's buffer, valid only inside View.
		pb.Data = append([]byte{}, pb.Data...)
		fs, err := DecodeData(pb.Data)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotUnixFS, err)
		}
		n.PB, n.FS = pb, fs
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	if err := n.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	return n, nil
}

func (n *Node) check() error {
	d := n.FS
	switch d.Type {
	case TypeFile, TypeRaw:
		if len(d.Blocksizes) != len(n.PB.Links) {
			return invalid("file node has %d links and %d blocksizes", len(n.PB.Links), len(d.Blocksizes))
		}
		sum := uint64(len(d.Data))
		for _, b := range d.Blocksizes {
			var carry uint64
			if sum, carry = bits.Add64(sum, b, 0); carry != 0 {
				return invalid("blocksizes overflow 64 bits")
			}
		}
		if d.HasFilesize && d.Filesize != sum {
			return invalid("filesize %d, but data and blocksizes hold %d", d.Filesize, sum)
		}
	case TypeDirectory:
		if len(d.Data) > 0 || len(d.Blocksizes) > 0 || d.HasFilesize {
			return invalid("directory with file data or sizes")
		}
	case TypeSymlink:
		if len(n.PB.Links) > 0 {
			return invalid("symlink with links")
		}
		if len(d.Data) > MaxSymlinkTarget {
			return invalid("symlink target of %d bytes, over %d", len(d.Data), MaxSymlinkTarget)
		}
	case TypeHAMTShard:
		if !d.HasHashType || d.HashType != hashMurmur3 {
			return fmt.Errorf("HAMT-sharded directory with hash function 0x%x (only murmur3-x64-64, 0x22, is read): %w", d.HashType, ErrUnsupported)
		}
		if !d.HasFanout || d.Fanout < 2 || d.Fanout > MaxFanout || d.Fanout&(d.Fanout-1) != 0 {
			return invalid("HAMT fanout %d is not a power of two from 2 to %d", d.Fanout, MaxFanout)
		}
		if uint64(len(d.Data)) > (d.Fanout+7)/8 {
			return invalid("HAMT bitfield of %d bytes for a fanout of %d", len(d.Data), d.Fanout)
		}
		set := 0
		for _, b := range d.Data {
			set += bits.OnesCount8(b)
		}
		if set != len(setBits(d.Data, d.Fanout)) {
			return invalid("HAMT bitfield sets bits beyond its fanout of %d", d.Fanout)
		}
		if set != len(n.PB.Links) {
			return invalid("HAMT bitfield has %d bits set for %d links", set, len(n.PB.Links))
		}
	case TypeMetadata:
		return fmt.Errorf("a UnixFS Metadata node: %w", ErrUnsupported)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("unixfs: %s: %w", fmt.Sprintf(format, args...), cas.ErrInvalid)
}
