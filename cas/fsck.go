package cas

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/ipfs/go-cid"
)

// FsckReport is what [Fsck] found.
type FsckReport struct {
	Blocks  int            `json:"blocks"`
	Bytes   int64          `json:"bytes"`
	Bad     []BadBlock     `json:"bad"`     // blocks whose bytes do not hash to their CID
	Missing []MissingIn    `json:"missing"` // blocks a pin reaches that are not stored
	Store   []StoreProblem `json:"store"`   // damage to the store's own structures
	Invalid []BadBlock     `json:"invalid"` // hg/file@1 and hg/tree@1 nodes whose sizes lie
}

// OK reports whether fsck found nothing wrong.
func (r *FsckReport) OK() bool {
	return len(r.Bad) == 0 && len(r.Missing) == 0 && len(r.Store) == 0 && len(r.Invalid) == 0
}

// A StoreChecker is a [Store] that can check its own structures: what
// lies beside the blocks (an index, counts, files), which re-hashing the
// blocks cannot see. [Fsck] calls CheckStore first.
type StoreChecker interface {
	// CheckStore returns every problem it finds; the error is for a
	// failure to look.
	CheckStore(ctx context.Context) ([]StoreProblem, error)
}

// StoreProblem is damage to a store's own structures.
type StoreProblem struct {
	Where string `json:"where"` // what is damaged: "pack 00000001.pack", "index entry bafy..."
	Error string `json:"error"`
}

// BadBlock is a stored block that failed verification.
type BadBlock struct {
	CID   cid.Cid `json:"cid"`
	Error string  `json:"error"`
}

// MissingIn is a pin whose closure is incomplete or unreadable.
type MissingIn struct {
	Pin   string `json:"pin"`
	Error string `json:"error"`
}

// Fsck checks the store's own structures (if it is a [StoreChecker]),
// re-hashes every stored block (on all cores), checks the sizes every
// hg/file@1 and hg/tree@1 node in the store records against its children
// (sizes), and walks every pin's closure. progress, if set, is called
// with the number of blocks checked.
//
// A block [BlockEnumerator.AllKeys] reports with a size below zero is one whose
// entry the store cannot read: a StoreChecker names it; any other store's
// is listed as bad.
func Fsck(ctx context.Context, st Store, progress func(done int)) (*FsckReport, error) {
	rep := &FsckReport{Store: []StoreProblem{}, Invalid: []BadBlock{}}
	objs := newObjectSizes()
	sc, checks := st.(StoreChecker)
	if checks {
		probs, err := sc.CheckStore(ctx)
		if err != nil {
			return nil, err
		}
		rep.Store = append(rep.Store, probs...)
	}
	jobs := make(chan cid.Cid, 256)
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for c := range jobs {
				err := st.View(ctx, c, func(data []byte) error {
					if c.Type() == DagCBOR {
						objs.note(c, data)
					}
					return nil
				})
				mu.Lock()
				if err != nil && !errors.Is(err, context.Canceled) {
					rep.Bad = append(rep.Bad, BadBlock{CID: c, Error: err.Error()})
				}
				rep.Blocks++
				if progress != nil {
					progress(rep.Blocks)
				}
				mu.Unlock()
			}
		})
	}
	err := st.AllKeys(ctx, func(c cid.Cid, size int) error {
		if size < 0 && checks {
			return nil // named by CheckStore
		}
		rep.Bytes += int64(max(size, 0))
		if c.Type() == Raw && size >= 0 {
			objs.raw(c, size)
		}
		jobs <- c
		return nil
	})
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err != nil {
		// Damage that stops the scan is a finding, not a failure to
		// look: the pins are still checked.
		if !errors.Is(err, ErrCorrupt) {
			return nil, err
		}
		rep.Store = append(rep.Store, StoreProblem{Where: "blocks", Error: "the scan of every block stopped: " + err.Error()})
	}
	slices.SortFunc(rep.Bad, func(x, y BadBlock) int { return bytes.Compare(x.CID.Bytes(), y.CID.Bytes()) })
	rep.Invalid = append(rep.Invalid, objs.check()...)
	pins, err := st.Pins(ctx)
	if errors.Is(err, ErrCorrupt) {
		rep.Store = append(rep.Store, StoreProblem{Where: "pins", Error: err.Error()})
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	for _, p := range pins {
		if err := CheckClosure(ctx, st, p.CID); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			rep.Missing = append(rep.Missing, MissingIn{Pin: p.Name, Error: err.Error()})
		}
	}
	return rep, nil
}

// objectSizes gathers the sizes file and tree nodes record, and the
// sizes of raw blocks, for fsck to check one against the other.
type objectSizes struct {
	mu      sync.Mutex
	rawSize map[cid.Cid]uint64
	files   map[cid.Cid]*FileNode
	trees   map[cid.Cid]*TreeNode
	invalid []BadBlock
}

func newObjectSizes() *objectSizes {
	return &objectSizes{rawSize: map[cid.Cid]uint64{}, files: map[cid.Cid]*FileNode{}, trees: map[cid.Cid]*TreeNode{}}
}

func (o *objectSizes) raw(c cid.Cid, size int) {
	o.mu.Lock()
	o.rawSize[c] = uint64(size)
	o.mu.Unlock()
}

// note records the verified block c if it is a file or tree node; one
// that breaks the rules of its type is invalid at once.
func (o *objectSizes) note(c cid.Cid, data []byte) {
	var err error
	switch objectType(data) {
	case TypeFile:
		var n FileNode
		if err = Unmarshal(data, &n); err == nil {
			if err = n.check(c); err == nil {
				o.mu.Lock()
				o.files[c] = &n
				o.mu.Unlock()
			}
		}
	case TypeTree:
		var t *TreeNode
		if t, err = DecodeTree(data); err == nil {
			o.mu.Lock()
			o.trees[c] = t
			o.mu.Unlock()
		}
	default:
		return
	}
	if err != nil {
		o.mu.Lock()
		o.invalid = append(o.invalid, BadBlock{CID: c, Error: err.Error()})
		o.mu.Unlock()
	}
}

// check returns every node whose size disagrees with its children: a
// file node's with its chunks (height 0) or child nodes, a tree entry's
// with the file, directory or symlink target it links to. A child that
// is not in the store is left to the closure walks; sums that overflow
// are errors.
func (o *objectSizes) check() []BadBlock {
	bad := o.invalid
	for c, n := range o.files {
		var sum uint64
		known := true
		for _, l := range n.Links {
			var size uint64
			if n.Height == 0 {
				s, ok := o.rawSize[l.Cid]
				known, size = known && ok, s
			} else if child, ok := o.files[l.Cid]; !ok {
				known = false
			} else if child.Height != n.Height-1 {
				bad = append(bad, BadBlock{c, fmt.Sprintf("file node of height %d links %s of height %d", n.Height, l.Cid, child.Height)})
				known = false
				break
			} else {
				size = child.Size
			}
			var carry uint64
			if sum, carry = bits.Add64(sum, size, 0); carry != 0 {
				bad = append(bad, BadBlock{c, "its children's sizes overflow 64 bits"})
				known = false
				break
			}
		}
		if known && sum != n.Size {
			bad = append(bad, BadBlock{c, fmt.Sprintf("file node says %d bytes, its children hold %d", n.Size, sum)})
		}
	}
	total := func(t *TreeNode) (uint64, bool) {
		var sum, carry uint64
		for _, e := range t.Entries {
			if sum, carry = bits.Add64(sum, e.Size, 0); carry != 0 {
				return 0, false
			}
		}
		return sum, true
	}
	for c, t := range o.trees {
		if _, ok := total(t); !ok {
			bad = append(bad, BadBlock{c, "its entries' sizes overflow 64 bits"})
		}
		for _, e := range t.Entries {
			var (
				size uint64
				ok   bool
			)
			switch e.Kind {
			case KindFile:
				var n *FileNode
				if n, ok = o.files[e.Link.Cid]; ok {
					size = n.Size
				}
			case KindDir:
				var sub *TreeNode
				if sub, ok = o.trees[e.Link.Cid]; ok {
					size, ok = total(sub) // an overflow is named at sub
				}
			case KindSymlink:
				size, ok = o.rawSize[e.Link.Cid]
			}
			if ok && size != e.Size {
				bad = append(bad, BadBlock{c, fmt.Sprintf("tree entry %q says %d bytes, its %s holds %d", e.Name, e.Size, e.Kind, size)})
			}
		}
	}
	slices.SortFunc(bad, func(x, y BadBlock) int {
		return cmp.Or(bytes.Compare(x.CID.Bytes(), y.CID.Bytes()), strings.Compare(x.Error, y.Error))
	})
	return bad
}
