package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// boltMeta reads the newer of the two meta pages of a bbolt file: its
// page size, freelist page and high-water mark.
func boltMeta(t *testing.T, data []byte) (pageSize, freelist, pgid uint64) {
	t.Helper()
	var txid uint64
	for _, off := range []uint64{0, 4096} {
		m := data[off+16:]
		if binary.LittleEndian.Uint32(m) != 0xED0CDAED {
			continue
		}
		if tx := binary.LittleEndian.Uint64(m[48:]); tx >= txid {
			txid = tx
			pageSize = uint64(binary.LittleEndian.Uint32(m[8:]))
			freelist = binary.LittleEndian.Uint64(m[32:])
			pgid = binary.LittleEndian.Uint64(m[40:])
		}
	}
	if pageSize == 0 {
		t.Fatal("no meta page")
	}
	return pageSize, freelist, pgid
}

// Every command meets a damaged store.db with "hg: error:" and exit 4,
// never a panic or a fault: a zeroed freelist page, a file cut short, a
// page of the index overwritten, both meta pages gone. The one exception
// is a command that only reads, on a store whose damage it never meets
// (the freelist is read only to write): it does its work, and fsck names
// the damage.
func TestDamagedDatabase(t *testing.T) {
	hg := hgBinary(t)
	work := t.TempDir()
	clean := filepath.Join(t.TempDir(), "clean")
	hgRun(t, hg, work, 0, "--store", clean, "init")
	f := filepath.Join(work, "f.bin")
	writeRandom(t, f, 3<<20, "f")
	hgRun(t, hg, work, 0, "--store", clean, "put", "--pin", "f", f)
	for i := range 40 {
		small := filepath.Join(work, "small")
		writeRandom(t, small, 300+i, "small"+string(rune('a'+i%26))+strings.Repeat("x", i))
		hgRun(t, hg, work, 0, "--store", clean, "put", small)
	}
	g := filepath.Join(work, "g.bin")
	writeRandom(t, g, 5000, "g")
	orig, err := os.ReadFile(filepath.Join(clean, "store.db"))
	if err != nil {
		t.Fatal(err)
	}
	pageSize, freelist, pgid := boltMeta(t, orig)
	for _, tc := range []struct {
		name      string
		damage    func([]byte) []byte
		readsWork bool
	}{
		{"zeroed freelist", func(d []byte) []byte {
			clear(d[freelist*pageSize : (freelist+1)*pageSize])
			return d
		}, true},
		{"cut short", func(d []byte) []byte { return d[:(pgid/2)*pageSize+100] }, false},
		{"index page overwritten", func(d []byte) []byte {
			for p := uint64(2); p < pgid; p++ {
				if p != freelist {
					copy(d[p*pageSize:(p+1)*pageSize], bytes.Repeat([]byte{0xab}, int(pageSize)))
				}
			}
			return d
		}, false},
		{"no meta page", func(d []byte) []byte {
			clear(d[:2*pageSize])
			return d
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			if out, err := exec.Command("cp", "-a", clean, store).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			if err := os.WriteFile(filepath.Join(store, "store.db"), tc.damage(bytes.Clone(orig)), 0o600); err != nil {
				t.Fatal(err)
			}
			reads := map[string]bool{"get": true, "pin ls": true, "stat": true, "dag get": true, "bundle export": true}
			for _, args := range [][]string{
				{"fsck"},
				{"put", f},
				{"gc"},
				{"get", "f", "-o", filepath.Join(t.TempDir(), "out")},
				{"pin", "ls"},
				{"stat", "f"},
				{"dag", "get", "f"},
				{"pin", "add", "g", "f"},
				{"pin", "rm", "f"},
				{"bundle", "export", "f", "-o", filepath.Join(t.TempDir(), "f.car")},
				{"put", "-r", work},
				{"put", g},
			} {
				name := args[0]
				if len(args) > 1 && (args[0] == "pin" || args[0] == "dag" || args[0] == "bundle") {
					name += " " + args[1]
				}
				cmd := exec.Command(hg, append([]string{"--store", store}, args...)...)
				cmd.Env = append(os.Environ(), "HG_STORE=", "HG_LOCK_TIMEOUT=2s")
				cmd.Stdin = strings.NewReader("")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				msg := stderr.String()
				if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") || strings.Contains(msg, "fatal error") {
					t.Errorf("hg %s crashed:\n%s", strings.Join(args, " "), firstLines(msg, 6))
					continue
				}
				if tc.readsWork && reads[name] {
					if code != 0 {
						t.Errorf("hg %s: exit %d, stderr %q; want it to read what is not damaged", name, code, firstLines(msg, 3))
					}
					continue
				}
				if code != 4 || !strings.HasPrefix(msg, "hg: error: ") {
					t.Errorf("hg %s: exit %d, stderr %q; want exit 4 and hg: error:", strings.Join(args, " "), code, firstLines(msg, 3))
				}
			}
		})
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// fsck --repair of a store whose every page of index entries is
// overwritten (the leaves of the blocks bucket: a large file's chunks, a
// tree of small files packed by one put, single small files) rebuilds
// every entry from the records beside the packs: it says how many it
// recovered, every pin is whole, every file reads back as put, and the
// store then checks clean. (The lost pages are still named, and the exit
// is 4: what else they held cannot be known.)
func TestRepairRebuildsIndexFromPacks(t *testing.T) {
	hg := hgBinary(t)
	work := t.TempDir()
	store := filepath.Join(t.TempDir(), "store")
	hgRun(t, hg, work, 0, "--store", store, "init")
	f := filepath.Join(work, "f.bin")
	writeRandom(t, f, 5<<20, "f")
	hgRun(t, hg, work, 0, "--store", store, "put", "--pin", "f", f)
	tree := filepath.Join(work, "tree")
	os.MkdirAll(tree, 0o755)
	for i := range 400 {
		writeRandom(t, filepath.Join(tree, "s"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))), 700+i, "t"+string(rune(i)))
	}
	hgRun(t, hg, work, 0, "--store", store, "put", "-r", "--pin", "tree", tree)
	for i := range 5 {
		g := filepath.Join(work, "g.bin")
		writeRandom(t, g, 200000+i, "g"+string(rune(i)))
		hgRun(t, hg, work, 0, "--store", store, "put", "--pin", "g"+string(rune('0'+i)), g)
	}
	path := filepath.Join(store, "store.db")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pageSize, freelist, pgid := boltMeta(t, data)
	destroyed := 0
	for p := uint64(2); p < pgid; p++ {
		page := data[p*pageSize : (p+1)*pageSize]
		if p == freelist || binary.LittleEndian.Uint16(page[8:]) != 0x02 || binary.LittleEndian.Uint16(page[10:]) == 0 {
			continue
		}
		// A leaf whose first key is a CIDv1 of sha2-256 (36 bytes).
		pos, ksize := binary.LittleEndian.Uint32(page[20:]), binary.LittleEndian.Uint32(page[24:])
		if k := 16 + uint64(pos); ksize == 36 && k+4 <= pageSize && page[k] == 0x01 && page[k+2] == 0x12 && page[k+3] == 0x20 {
			copy(page, bytes.Repeat([]byte{0xab}, int(pageSize)))
			destroyed++
		}
	}
	if destroyed < 2 {
		t.Fatalf("%d leaves of the index found", destroyed)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	hgRun2(t, hg, work, 4, "--store", store, "fsck")
	out, stderr := hgRun2(t, hg, work, 4, "--store", store, "fsck", "--repair")
	t.Logf("%s%s", out, stderr)
	if !strings.Contains(out, "repair: lost ") || strings.Contains(out, "repair: recovered 0 ") {
		t.Errorf("fsck --repair names no page lost:\n%s", out)
	}
	if strings.Contains(out, "recovered 0 from") || !strings.Contains(out, "recovered ") {
		t.Errorf("fsck --repair recovered nothing:\n%s", out)
	}
	if !strings.Contains(out, " 0 bad, 0 pins incomplete, 0 store problems, ") || strings.Contains(out, "missing pin") {
		t.Errorf("after repair pins are incomplete:\n%s", out)
	}
	if strings.Contains(out, ".orphan") {
		t.Errorf("repair set packs aside:\n%s", out)
	}
	hgRun(t, hg, work, 0, "--store", store, "fsck")
	for pin, want := range map[string]string{"f": f, "g4": filepath.Join(work, "g.bin")} {
		got := filepath.Join(t.TempDir(), "out")
		hgRun(t, hg, work, 0, "--store", store, "get", pin, "-o", got)
		a, _ := os.ReadFile(got)
		b, _ := os.ReadFile(want)
		if !bytes.Equal(a, b) {
			t.Errorf("%s after repair: %d bytes, put %d", pin, len(a), len(b))
		}
	}
	outTree := filepath.Join(t.TempDir(), "tree")
	hgRun(t, hg, work, 0, "--store", store, "get", "tree", "-o", outTree)
	if out, err := exec.Command("diff", "-r", tree, outTree).CombinedOutput(); err != nil {
		t.Errorf("tree after repair: %v\n%s", err, out)
	}
	hgRun(t, hg, work, 0, "--store", store, "gc")
	hgRun(t, hg, work, 0, "--store", store, "fsck")
}
