package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// RepairReport says what [Repair] did and what it could not keep.
type RepairReport struct {
	Kept      int      `json:"kept_entries"`   // index entries carried into the new database
	Recovered int      `json:"recovered"`      // entries the database lacked, rebuilt from the packs' sidecars
	Pins      int      `json:"pins"`           // pins carried over
	Refs      int      `json:"refs"`           // refs carried over
	Dropped   []string `json:"dropped"`        // entries left out, and why
	Lost      []string `json:"lost_pages"`     // parts of the old file that could not be read: what they held is lost
	OlderMeta bool     `json:"older_meta"`     // the newest state was unreadable: the one before it was used
	Orphaned  []string `json:"orphaned_packs"` // pack files no kept entry points into, set aside
	Counts    int      `json:"packs_counted"`  // packs whose counts were set from the new index
	Damaged   string   `json:"damaged_db"`     // where the old database was kept
}

// Repair rebuilds the database of the store in dir from what can still
// be read of it, for a store whose database is damaged (fsck names the
// damage). It needs the store to itself.
//
// It reads the old file through plain reads (not bbolt, which trusts the
// file), page by page from its newest meta page (from the one before if
// the newest state cannot be read whole and the older can), passing over
// every page it cannot read. Into a new database it carries every index
// entry that decodes, is keyed by a CID, and points into a pack file long
// enough to hold it; every pin and ref that holds a CID; the current pack.
// Then, from each pack's sidecar (sidecar.go), it adds every block the
// new index lacks whose record points inside the pack at bytes that hash
// to the record's CID, and from the inline log every block whose
// record's bytes hash to its CID (RepairReport.Recovered): so an entry on
// a page that cannot be read is rebuilt from the bytes still on disk.
// It sets every pack's counts from the new index. It never deletes a
// byte of block data: pack files no entry points into are renamed
// NNNNNNNN.pack.orphan, their sidecars NNNNNNNN.packidx.orphan (no hg
// command touches them), and the old database is kept as
// store.db.damaged-TIME. Then the new database takes the old one's place.
//
// What it cannot do: rebuild the entries of a pack that has no sidecar
// (one written before sidecars were) or whose sidecar lacks them (it is
// not synced on its own, so a crash of the machine may lose its last
// records, and the database's copy of them with it only if both are
// lost). Such entries on a page that cannot be read are lost (the report
// names the pages, and fsck then names the pins whose closures are
// incomplete). A block deleted by gc whose bytes are still in its pack
// comes back too; the next gc deletes it again.
func Repair(dir string, timeout time.Duration) (*RepairReport, error) {
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	path := filepath.Join(dir, dbFile)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no store at %s: %w", dir, cas.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", dir, err)
	}
	defer f.Close()
	if err := lockFile(f, timeout); err != nil {
		return nil, &cas.BusyError{Path: dir, Holder: readHolder(dir)}
	}
	metas, err := readMetas(f)
	if err != nil {
		return nil, fmt.Errorf("repair %s: nothing can be read: %w", dir, err)
	}
	rep := &RepairReport{}
	var (
		contents map[string][]pair // bucket path (names joined by NUL) -> its pairs
		lost     []string
	)
	most := -1
	for i, m := range metas {
		got, n := map[string][]pair{}, 0
		probs := walkDB(f, m, 1000, func(path []string, k, v []byte) {
			key := string(bytes.Join(bytesOf(path), []byte{0}))
			got[key] = append(got[key], pair{bytes.Clone(k), bytes.Clone(v)})
			n++
		})
		// The newest state, unless the one before it reads more.
		if n > most {
			contents, lost, rep.OlderMeta, most = got, probs, i > 0, n
		}
		if len(probs) == 0 {
			break
		}
	}
	rep.Lost = lost

	// The pack files, to check every location against.
	packs, err := listPacks(filepath.Join(dir, packDir))
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", dir, err)
	}
	packSize := map[uint64]uint64{}
	for _, p := range packs {
		packSize[p.n] = uint64(p.size)
	}

	newPath := path + ".repair"
	_ = os.Remove(newPath)
	if err := os.WriteFile(newPath, nil, 0o600); err != nil {
		return nil, fmt.Errorf("repair %s: %w", dir, err)
	}
	defer os.Remove(newPath) // gone by then if all went well
	if err := initDB(newPath); err != nil {
		return nil, fmt.Errorf("repair %s: %w", dir, err)
	}
	db, err := bolt.Open(newPath, 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", dir, err)
	}
	use := map[uint64]*packUse{}
	have := map[string]bool{} // the keys of the new index
	count := func(l location) {
		u := use[l.pack]
		if u == nil {
			u = &packUse{}
			use[l.pack] = u
		}
		u.blocks++
		u.bytes += l.length
		u.extent = max(u.extent, l.offset+l.length)
	}
	err = func() error {
		// Blocks, in batches: the keys come in order from the walk.
		blocks := contents[string(bucketBlocks)]
		for len(blocks) > 0 {
			n := min(len(blocks), 10000)
			err := db.Update(func(tx *bolt.Tx) error {
				bk := tx.Bucket(bucketBlocks)
				for _, e := range blocks[:n] {
					c, err := cas.CastCID(e.k)
					if err != nil {
						rep.Dropped = append(rep.Dropped, fmt.Sprintf("index key %x: not a CID", e.k))
						continue
					}
					ent, err := decodeEntry(e.v)
					if err != nil {
						rep.Dropped = append(rep.Dropped, fmt.Sprintf("index entry %s: %v", c, err))
						continue
					}
					if ent.packed {
						l := ent.loc
						if size, ok := packSize[l.pack]; !ok || l.offset+l.length > size || l.offset+l.length < l.offset {
							rep.Dropped = append(rep.Dropped, fmt.Sprintf("index entry %s: points past the end of pack %s", c, packName(l.pack)))
							continue
						}
						count(l)
					}
					if err := bk.Put(e.k, e.v); err != nil {
						return err
					}
					have[string(e.k)] = true
					rep.Kept++
				}
				return nil
			})
			if err != nil {
				return err
			}
			blocks = blocks[n:]
		}
		// The entries the index lacks, from the packs' sidecars.
		for _, p := range packs {
			var found []location
			var keys [][]byte
			_, err := recoverFromSidecar(filepath.Join(dir, packDir), p.n, uint64(p.size),
				func(k []byte) bool { return have[string(k)] },
				func(c cid.Cid, l location) {
					have[c.KeyString()] = true
					keys = append(keys, c.Bytes())
					found = append(found, l)
				})
			if err != nil {
				return fmt.Errorf("pack index %s: %w", sidecarName(p.n), err)
			}
			for len(found) > 0 {
				n := min(len(found), 10000)
				err := db.Update(func(tx *bolt.Tx) error {
					bk := tx.Bucket(bucketBlocks)
					for i, l := range found[:n] {
						if err := bk.Put(keys[i], l.encode()); err != nil {
							return err
						}
						count(l)
						rep.Recovered++
					}
					return nil
				})
				if err != nil {
					return err
				}
				found, keys = found[n:], keys[n:]
			}
		}
		// The blocks kept inline that the index lacks, from the inline log.
		var ikeys, idata [][]byte
		if _, err := recoverInline(filepath.Join(dir, packDir),
			func(k []byte) bool { return have[string(k)] },
			func(k, data []byte) {
				have[string(k)] = true
				ikeys = append(ikeys, k)
				idata = append(idata, data)
			}); err != nil {
			return fmt.Errorf("%s: %w", inlineLog, err)
		}
		for len(ikeys) > 0 {
			n := min(len(ikeys), 10000)
			err := db.Update(func(tx *bolt.Tx) error {
				bk := tx.Bucket(bucketBlocks)
				for i := range n {
					if err := bk.Put(ikeys[i], inlineValue(idata[i])); err != nil {
						return err
					}
					rep.Recovered++
				}
				return nil
			})
			if err != nil {
				return err
			}
			ikeys, idata = ikeys[n:], idata[n:]
		}
		return db.Update(func(tx *bolt.Tx) error {
			for _, e := range contents[string(bucketPins)] {
				if _, err := cas.CastCID(e.v); err != nil || cas.CheckPinName(string(e.k)) != nil {
					rep.Dropped = append(rep.Dropped, fmt.Sprintf("pin %q: not a pin of a CID", e.k))
					continue
				}
				if err := tx.Bucket(bucketPins).Put(e.k, e.v); err != nil {
					return err
				}
				rep.Pins++
			}
			prefix := string(bucketRefs) + "\x00"
			var names []string
			for name := range contents {
				if ns, ok := bytes.CutPrefix([]byte(name), []byte(prefix)); ok {
					names = append(names, string(ns))
				}
			}
			slices.Sort(names)
			for _, ns := range names {
				for _, e := range contents[prefix+ns] {
					if _, err := cas.CastCID(e.v); err != nil || cas.CheckRef(ns, string(e.k)) != nil {
						rep.Dropped = append(rep.Dropped, fmt.Sprintf("ref %s/%s: not a ref of a CID", ns, e.k))
						continue
					}
					b, err := tx.Bucket(bucketRefs).CreateBucketIfNotExists([]byte(ns))
					if err != nil {
						return err
					}
					if err := b.Put(e.k, e.v); err != nil {
						return err
					}
					rep.Refs++
				}
			}
			// The current pack: as recorded, if it reads, and never
			// below a pack an entry points into.
			var cur uint64
			for _, e := range contents[string(bucketMeta)] {
				if bytes.Equal(e.k, keyPackCur) {
					cur, _ = strconv.ParseUint(string(e.v), 10, 64)
				}
			}
			for n := range use {
				cur = max(cur, n)
			}
			if cur > 0 {
				if err := tx.Bucket(bucketMeta).Put(keyPackCur, []byte(strconv.FormatUint(cur, 10))); err != nil {
					return err
				}
			}
			for n, u := range use {
				if err := putPackStat(tx, n, packStat{live: u.blocks, liveBytes: u.bytes, end: u.extent}); err != nil {
					return err
				}
				rep.Counts++
			}
			return nil
		})
	}()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("repair %s: %w", dir, err)
	}
	if nf, err := os.Open(newPath); err == nil {
		err = nf.Sync()
		nf.Close()
		if err != nil {
			return nil, fmt.Errorf("repair %s: %w", dir, err)
		}
	}

	// Set aside, never delete, the packs nothing points into now, and
	// their sidecars with them.
	for _, p := range packs {
		if _, ok := use[p.n]; ok || p.size == 0 {
			continue
		}
		from := filepath.Join(dir, packDir, packName(p.n))
		if err := os.Rename(from, from+".orphan"); err != nil {
			return nil, fmt.Errorf("repair %s: %w", dir, err)
		}
		rep.Orphaned = append(rep.Orphaned, packName(p.n)+".orphan")
		side := filepath.Join(dir, packDir, sidecarName(p.n))
		if err := os.Rename(side, side+".orphan"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("repair %s: %w", dir, err)
		}
	}
	rep.Damaged = dbFile + ".damaged-" + time.Now().UTC().Format("20060102T150405Z")
	if err := os.Rename(path, filepath.Join(dir, rep.Damaged)); err != nil {
		return nil, fmt.Errorf("repair %s: %w", dir, err)
	}
	if err := os.Rename(newPath, path); err != nil {
		return nil, fmt.Errorf("repair %s: the damaged database is %s, and the new one could not take its place: %w", dir, rep.Damaged, err)
	}
	syncDir(dir)
	return rep, nil
}

// pair is a key and value read from a damaged database.
type pair struct{ k, v []byte }

// bytesOf converts a bucket path for joining.
func bytesOf(path []string) [][]byte {
	out := make([][]byte, len(path))
	for i, p := range path {
		out[i] = []byte(p)
	}
	return out
}
