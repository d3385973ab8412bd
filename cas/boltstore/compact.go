package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

var _ cas.Compacter = (*Store)(nil)

// Compact gives the space of deleted blocks back to the file system. In
// one write transaction it reads the whole index, sets every pack's
// counts from it, and drops the packs nothing points into; after the
// commit it removes their files and cuts every other pack after its last
// block. The index decides, never the counts: an entry of the index that
// does not decode (it could point anywhere) stops Compact before it
// changes anything, with an error wrapping [cas.ErrCorrupt].
//
// A crash at any point loses nothing: the files are removed and cut only
// after the commit, and the next writer's recovery finishes the job from
// the index.
func (s *Store) Compact(ctx context.Context, opts *cas.CompactOptions) (cas.CompactStats, error) {
	var st cas.CompactStats
	end, err := s.begin(ctx, true)
	if err != nil {
		return st, err
	}
	defer end()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	before := s.diskUsage()
	files, err := listPacks(s.packs.dir)
	if err != nil {
		return st, fmt.Errorf("compact %s: %w", s.dir, err)
	}
	var rc reclaim
	err = update(s.db, func(tx *bolt.Tx) error {
		var err error
		_, rc, err = settle(ctx, tx, files)
		return err
	})
	if errors.Is(err, errIndexUnreadable) {
		return st, fmt.Errorf("compact %s: %w (run 'hg fsck' to list them)", s.dir, err)
	}
	if err != nil {
		return st, fmt.Errorf("compact %s: %w", s.dir, err)
	}
	if err := s.packs.apply(rc); err != nil {
		return st, fmt.Errorf("compact %s: %w", s.dir, err)
	}
	st.PacksRemoved = len(rc.remove)
	st.DiskBytes = s.diskUsage()
	st.DiskFreedBytes = max(0, before-st.DiskBytes)
	return st, nil
}

// diskUsage is what the store's database and packs take on disk.
func (s *Store) diskUsage() int64 {
	var n int64
	if info, err := os.Stat(filepath.Join(s.dir, dbFile)); err == nil {
		n += diskBytes(info)
	}
	ents, _ := os.ReadDir(s.packs.dir)
	for _, de := range ents {
		if info, err := de.Info(); err == nil && info.Mode().IsRegular() {
			n += diskBytes(info)
		}
	}
	return n
}
