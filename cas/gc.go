package cas

import (
	"context"
	"fmt"

	"github.com/ipfs/go-cid"
)

// GCOptions tune [GC]. A nil *GCOptions means the defaults.
type GCOptions struct {
	// Roots are kept in addition to the pins: later layers pass the
	// roots of runs and memo entries here.
	Roots []cid.Cid
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
}

// GCStats reports what a collection did.
type GCStats struct {
	Kept       int   `json:"kept_blocks"`
	Removed    int   `json:"removed_blocks"`
	FreedBytes int64 `json:"freed_bytes"`
	DryRun     bool  `json:"dry_run"`
	CompactStats
}

// A Compacter is a [Store] that can give the space of deleted blocks back
// to the file system. [GC] calls Compact after its sweep.
type Compacter interface {
	// Compact reclaims the space of deleted blocks. It must establish
	// from the store's index itself, not from any count kept beside it,
	// that nothing live lies in space before it gives that space back.
	Compact(ctx context.Context, opts *CompactOptions) (CompactStats, error)
}

// CompactOptions tune [Compacter.Compact]. A nil *CompactOptions means the
// defaults.
type CompactOptions struct {
	// ReclaimOnly gives back only what needs no copying: packs with no
	// live block and the dead tails of the others.
	ReclaimOnly bool
}

// CompactStats reports what a compaction did.
type CompactStats struct {
	PacksRemoved   int   `json:"packs_removed"`    // files that held no live block
	DiskBytes      int64 `json:"disk_bytes"`       // the store's files on disk after gc
	DiskFreedBytes int64 `json:"disk_freed_bytes"` // what gc gave back to the file system
}

// gcDeleteBatch is how many blocks one delete transaction removes.
const gcDeleteBatch = 10000

// GC removes every block that no pin, no ref and no extra root reaches. It marks
// first and refuses to sweep if any reachable block is missing or corrupt
// (an unreadable link could hide a live block); run fsck then. Deletes go
// in batches, each atomic, and only ever remove unreachable blocks, so a
// crash part-way leaves a consistent store.
func GC(ctx context.Context, st Store, opts *GCOptions) (GCStats, error) {
	if opts == nil {
		opts = &GCOptions{}
	}
	roots, err := Roots(ctx, st)
	if err != nil {
		return GCStats{}, err
	}
	roots = append(roots, opts.Roots...)
	live := make(map[cid.Cid]struct{})
	err = Walk(ctx, st, roots, &WalkOptions{SkipRawData: true}, func(c cid.Cid, _ []byte) error {
		live[c] = struct{}{}
		return nil
	})
	if err != nil {
		return GCStats{}, fmt.Errorf("gc: marking live blocks: %w", err)
	}
	stats := GCStats{DryRun: opts.DryRun}
	var dead []cid.Cid
	err = st.AllKeys(ctx, func(c cid.Cid, size int) error {
		if _, ok := live[c]; ok {
			stats.Kept++
			return nil
		}
		stats.Removed++
		stats.FreedBytes += int64(max(size, 0))
		dead = append(dead, c)
		return nil
	})
	if err != nil {
		return GCStats{}, err
	}
	if opts.DryRun {
		return stats, nil
	}
	for len(dead) > 0 {
		n := min(len(dead), gcDeleteBatch)
		if err := st.Delete(ctx, dead[:n]...); err != nil {
			return GCStats{}, err
		}
		dead = dead[n:]
	}
	if c, ok := st.(Compacter); ok {
		cs, err := c.Compact(ctx, nil)
		stats.CompactStats = cs
		if err != nil {
			return stats, fmt.Errorf("gc: removed %d blocks, then compaction failed: %w", stats.Removed, err)
		}
	}
	return stats, nil
}
