package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	bolt "go.etcd.io/bbolt"
)

// repairFixture makes a store with a pinned 3 MiB file, a pinned tree of
// small files and some unpinned files, and returns it with the CIDs of
// two unpinned blocks.
func repairFixture(t *testing.T, hg, work string) (store string, loose []string) {
	t.Helper()
	store = filepath.Join(t.TempDir(), "store")
	hgRun(t, hg, work, 0, "--store", store, "init")
	f := filepath.Join(work, "f.bin")
	writeRandom(t, f, 3<<20, "f")
	hgRun(t, hg, work, 0, "--store", store, "put", "--pin", "f", f)
	tree := filepath.Join(work, "tree")
	os.MkdirAll(tree, 0o755)
	for i := range 30 {
		writeRandom(t, filepath.Join(tree, "s"+string(rune('a'+i%26))+strings.Repeat("x", i/26)), 200+i*10, "s"+string(rune(i)))
	}
	hgRun(t, hg, work, 0, "--store", store, "put", "-r", "--pin", "tree", tree)
	for i := range 2 {
		g := filepath.Join(work, "g.bin")
		writeRandom(t, g, 1000+i, "g"+string(rune(i)))
		c := strings.TrimSpace(hgRun(t, hg, work, 0, "--store", store, "put", g))
		var st struct {
			Links int `json:"links"`
		}
		json.Unmarshal([]byte(hgRun(t, hg, work, 0, "--store", store, "stat", "--json", c)), &st)
		loose = append(loose, c)
	}
	return store, loose
}

// fsck lists every bad index entry (three values that do not decode, one
// of them a pinned file's chunk, and a key that is no CID) and exits 4,
// where it used to stop with exit 1 at the first; gc refuses to compact
// while a live one is there (it could point anywhere); fsck --repair
// drops them, keeps everything else, and names the pin it could not keep
// whole; once that pin goes, the store checks clean.
func TestFsckListsEveryBadEntryAndRepairs(t *testing.T) {
	hg := hgBinary(t)
	work := t.TempDir()
	store, loose := repairFixture(t, hg, work)
	db, err := bolt.Open(filepath.Join(store, "store.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(work, "f.bin"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := cas.NewBlock(cas.Raw, data[:cas.ChunkSize]).CID().String()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("blocks"))
		for _, s := range append(loose, chunk) {
			c, err := cas.ParseCID(s)
			if err != nil {
				return err
			}
			if err := b.Put(c.Bytes(), []byte{0x07, 1, 2}); err != nil {
				return err
			}
		}
		return b.Put([]byte("not a cid"), []byte{0x00, 'x'})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := hgRun2(t, hg, work, 4, "--store", store, "fsck")
	for _, want := range []string{"store   index entry " + loose[0] + ": malformed entry", "store   index entry " + loose[1] + ": malformed entry", "store   index entry " + chunk + ": malformed entry", "store   index key 6e6f74206120636964: not a CID", "store   pack 00000001.pack: the counts say 3 blocks"} {
		if !strings.Contains(out, want) {
			t.Errorf("fsck does not say %q:\n%s", want, out)
		}
	}
	_, stderr := hgRun2(t, hg, work, 4, "--store", store, "gc")
	if !strings.Contains(stderr, "do not decode") {
		t.Errorf("gc over a damaged index: %s", stderr)
	}
	out, _ = hgRun2(t, hg, work, 4, "--store", store, "fsck", "--repair")
	// gc's sweep took the two loose entries away before it refused; the
	// chunk's entry, dropped, is rebuilt from its pack's sidecar, so the
	// pin f is whole again (the loose blocks come back too, from the
	// sidecars, for the next gc to take).
	if strings.Count(out, "repair: dropped ") != 2 || !strings.Contains(out, "recovered ") || strings.Contains(out, "recovered 0 ") || !strings.Contains(out, ", 0 store problems, ") || strings.Contains(out, "missing pin") {
		t.Errorf("fsck --repair:\n%s", out)
	}
	hgRun(t, hg, work, 0, "--store", store, "get", "tree", "-o", filepath.Join(work, "tree.out"))
	hgRun(t, hg, work, 0, "--store", store, "get", "f", "-o", filepath.Join(work, "f.out"))
	if got, err := os.ReadFile(filepath.Join(work, "f.out")); err != nil || !bytes.Equal(got, data) {
		t.Errorf("f after repair: %v", err)
	}
	hgRun(t, hg, work, 0, "--store", store, "gc")
	hgRun(t, hg, work, 0, "--store", store, "fsck")
	if m, _ := filepath.Glob(filepath.Join(store, "store.db.damaged-*")); len(m) != 1 {
		t.Errorf("the old database was not kept: %v", m)
	}
}

// fsck --repair rebuilds a database bbolt cannot use: a zeroed freelist
// (nothing lost), a page of the index overwritten, a file cut short (the
// pages lost are named, exit 4, and the entries they held are rebuilt
// from the packs' sidecars: every pin is whole). Every command works on
// the repaired store, and no byte of a pack is deleted.
func TestRepairDamagedDatabase(t *testing.T) {
	hg := hgBinary(t)
	work := t.TempDir()
	clean, _ := repairFixture(t, hg, work)
	orig, err := os.ReadFile(filepath.Join(clean, "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	pageSize, freelist, pgid := boltMeta(t, orig)
	for _, tc := range []struct {
		name     string
		damage   func([]byte) []byte
		lossless bool
	}{
		{"zeroed freelist", func(d []byte) []byte {
			clear(d[freelist*pageSize : (freelist+1)*pageSize])
			return d
		}, true},
		{"leaf overwritten", func(d []byte) []byte {
			// The first page past the meta pages that holds leaf
			// elements keyed by CIDs: a page of the blocks bucket.
			for p := uint64(2); p < pgid; p++ {
				page := d[p*pageSize : (p+1)*pageSize]
				if p != freelist && page[8] == 0x02 && bytes.Contains(page, []byte{0x01, 0x55, 0x12, 0x20}) {
					copy(page, bytes.Repeat([]byte{0xab}, int(pageSize)))
					return d
				}
			}
			t.Fatal("no leaf page of blocks")
			return nil
		}, false},
		{"cut short", func(d []byte) []byte { return d[:(pgid/2)*pageSize] }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			if out, err := exec.Command("cp", "-a", clean, store).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			if err := os.WriteFile(filepath.Join(store, "store.db"), tc.damage(bytes.Clone(orig)), 0o600); err != nil {
				t.Fatal(err)
			}
			hgRun2(t, hg, work, 4, "--store", store, "fsck")
			before := packBytes(t, store)
			want := 0
			if !tc.lossless {
				want = 4
			}
			out, stderr := hgRun2(t, hg, work, want, "--store", store, "fsck", "--repair")
			t.Logf("%s%s", out, stderr)
			if !strings.Contains(out, "repair: kept ") {
				t.Errorf("fsck --repair did not say what it kept:\n%s", out)
			}
			if !tc.lossless && !strings.Contains(out, "missing pin ") && !strings.Contains(out, "repair: lost ") {
				t.Errorf("fsck --repair after losing a page names nothing lost:\n%s", out)
			}
			if after := packBytes(t, store); after != before {
				t.Errorf("repair changed the packs' bytes from %d to %d", before, after)
			}
			// Every entry on the pages lost is rebuilt from the packs'
			// sidecars: every pin is whole. The store is usable again:
			// writes, gc, reads.
			var after struct {
				Missing []struct{ Pin string } `json:"missing"`
			}
			out, _ = hgRun2(t, hg, work, 0, "--store", store, "fsck", "--json")
			if err := json.Unmarshal([]byte(out), &after); err != nil {
				t.Fatal(err)
			}
			if len(after.Missing) > 0 {
				t.Errorf("pins incomplete after repair: %+v", after.Missing)
			}
			g := filepath.Join(work, "new.bin")
			writeRandom(t, g, 500000, "new"+tc.name)
			hgRun(t, hg, work, 0, "--store", store, "put", "--pin", "new", g)
			hgRun(t, hg, work, 0, "--store", store, "gc", "--max-unused", "unlimited")
			hgRun(t, hg, work, 0, "--store", store, "get", "new", "-o", filepath.Join(t.TempDir(), "new.out"))
			hgRun(t, hg, work, 0, "--store", store, "fsck")
		})
	}
}

// packBytes is the bytes of every file under the store's packs
// directory, set-aside ones included.
func packBytes(t *testing.T, store string) int64 {
	t.Helper()
	var n int64
	ents, _ := os.ReadDir(filepath.Join(store, "packs"))
	for _, e := range ents {
		if info, err := e.Info(); err == nil {
			n += info.Size()
		}
	}
	return n
}
