package cas

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"
)

// GCOptions tune [GC]. A nil *GCOptions means the defaults.
type GCOptions struct {
	// Roots are kept in addition to the pins: later layers pass the
	// roots of runs and memo entries here.
	Roots []cid.Cid
	// DryRun reports what would be removed and removes nothing; it
	// compacts nothing either.
	DryRun bool
	// Compact tunes the compaction GC runs after its sweep on a store
	// that is a [Compacter]; nil means the defaults.
	Compact *CompactOptions
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

// CompactOptions tune [Compacter.Compact]. A nil *CompactOptions means
// the defaults: [DefaultMaxUnused].
type CompactOptions struct {
	// MaxUnused is how much dead space compaction may leave in the
	// store. The zero value leaves none.
	MaxUnused UnusedLimit
}

// CompactStats reports what a compaction did.
type CompactStats struct {
	PacksRemoved   int   `json:"packs_removed"`    // files that held no live block
	PacksRewritten int   `json:"packs_rewritten"`  // files whose live blocks were copied out, then removed
	CopiedBytes    int64 `json:"copied_bytes"`     // bytes of live blocks copied
	UnusedBytes    int64 `json:"unused_bytes"`     // dead bytes left in the store's files
	Postponed      int   `json:"postponed_packs"`  // files left to rewrite for want of disk space
	DiskBytes      int64 `json:"disk_bytes"`       // the store's files on disk after gc
	DiskFreedBytes int64 `json:"disk_freed_bytes"` // what gc gave back to the file system
}

// UnusedLimit bounds the dead space compaction leaves: a percentage of the
// live bytes, a number of bytes, or no bound at all, when only what needs
// no copying goes (files with no live block, dead space at their ends).
// The zero value is 0%: every dead byte goes.
type UnusedLimit struct {
	Unlimited bool
	InBytes   bool    // Bytes is the bound, not Percent
	Bytes     int64   // when InBytes
	Percent   float64 // of the live bytes, unless InBytes
}

// DefaultMaxUnused is the dead space gc leaves unless told otherwise: 5%
// of the live bytes, as restic's prune leaves by default.
var DefaultMaxUnused = UnusedLimit{Percent: 5}

// Of is the bound for a store holding live bytes; -1 for no bound.
func (l UnusedLimit) Of(live int64) int64 {
	switch {
	case l.Unlimited:
		return -1
	case l.InBytes:
		return l.Bytes
	}
	return int64(float64(live) * l.Percent / 100)
}

func (l UnusedLimit) String() string {
	switch {
	case l.Unlimited:
		return "unlimited"
	case l.InBytes:
		return strconv.FormatInt(l.Bytes, 10)
	}
	return strconv.FormatFloat(l.Percent, 'f', -1, 64) + "%"
}

// ParseUnusedLimit reads a bound on dead space as restic's --max-unused
// takes it: a percentage ("5%"), a number of bytes with an optional
// suffix k, m, g or t (powers of 1024: "200M"), or "unlimited".
func ParseUnusedLimit(s string) (UnusedLimit, error) {
	bad := fmt.Errorf("max unused %q: want a percentage (5%%), a size (200M) or unlimited: %w", s, ErrInvalid)
	t := strings.TrimSpace(s)
	switch {
	case strings.EqualFold(t, "unlimited"):
		return UnusedLimit{Unlimited: true}, nil
	case strings.HasSuffix(t, "%"):
		p, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
		if err != nil || p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
			return UnusedLimit{}, bad
		}
		return UnusedLimit{Percent: p}, nil
	}
	mult := int64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("kmgt", t[n-1]|0x20); i >= 0 {
			mult, t = 1<<(10*(i+1)), t[:n-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return UnusedLimit{}, bad
	}
	return UnusedLimit{InBytes: true, Bytes: n * mult}, nil
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
		cs, err := c.Compact(ctx, opts.Compact)
		stats.CompactStats = cs
		if err != nil {
			return stats, fmt.Errorf("gc: removed %d blocks, then compaction failed: %w", stats.Removed, err)
		}
	}
	return stats, nil
}
