package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore/internal/flip"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
)

// newStore makes a store in a temporary directory and opens it for
// writing; the test closes it.
func newStore(t testing.TB) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), ".haygent")
	if err := Init(dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, dir
}

// corruptOpen replaces the stored bytes of c in the open store s.
func corruptOpen(s *Store, c cid.Cid, data []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketBlocks)
		if b.Get(c.Bytes()) == nil {
			return &cas.NotFoundError{CID: c}
		}
		return b.Put(c.Bytes(), inlineValue(data))
	})
}

func TestConformance(t *testing.T) {
	storetest.RunWithOptions(t, func(t *testing.T) cas.Store {
		s, _ := newStore(t)
		return s
	}, storetest.Options{
		Corrupt: func(t *testing.T, s cas.Store, c cid.Cid, data []byte) {
			if err := corruptOpen(s.(*Store), c, data); err != nil {
				t.Fatalf("corrupt %s: %v", c, err)
			}
		},
	})
}

func block(seed string, n int) cas.Block {
	d := make([]byte, n)
	copy(d, seed)
	for i := len(seed); i < n; i++ {
		d[i] = byte(i*7 + i>>8)
	}
	return cas.NewBlock(cas.Raw, d)
}

func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", ".haygent")
	if err := Init(dir); err != nil {
		t.Fatalf("Init: %v", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("store directory has mode %v, want 0700", perm)
	}
	if _, err := os.Stat(filepath.Join(dir, "store.db")); err != nil {
		t.Errorf("store.db: %v", err)
	}
	err = Init(dir)
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Init of an existing store = %v, want an error wrapping fs.ErrExist naming %s", err, dir)
	}
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after a failed second Init: %v", err)
	}
	defer s.Close()
	if s.Path() != dir {
		t.Errorf("Path() = %q, want %q", s.Path(), dir)
	}
	if err := s.db.View(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketBlocks, bucketPins, bucketMeta} {
			if tx.Bucket(b) == nil {
				t.Errorf("no bucket %q", b)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenMissing(t *testing.T) {
	for _, ro := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), ".haygent")
		_, err := Open(dir, &Options{ReadOnly: ro})
		if !errors.Is(err, cas.ErrNotFound) || !strings.Contains(err.Error(), "no store at "+dir) {
			t.Errorf("Open(ReadOnly=%v) of a missing store = %v, want an error wrapping cas.ErrNotFound saying no store at %s", ro, err, dir)
		}
		// An empty directory is no store either, and Open must not make one.
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err = Open(dir, &Options{ReadOnly: ro})
		if !errors.Is(err, cas.ErrNotFound) {
			t.Errorf("Open(ReadOnly=%v) of an empty directory = %v, want cas.ErrNotFound", ro, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "store.db")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open of an empty directory created store.db (%v)", err)
		}
	}
}

func TestOpenNotADatabase(t *testing.T) {
	for name, content := range map[string][]byte{
		"empty":     {},
		"short":     []byte("hello"),
		"text page": bytes.Repeat([]byte("not a database\n"), 300),
		"zeros":     make([]byte, 64<<10),
	} {
		for _, ro := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/ReadOnly=%v", name, ro), func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "store.db")
				if err := os.WriteFile(path, content, 0o600); err != nil {
					t.Fatal(err)
				}
				s, err := Open(dir, &Options{ReadOnly: ro})
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded")
				}
				if !strings.Contains(err.Error(), path) {
					t.Errorf("error %q does not name %s", err, path)
				}
				t.Log(err)
				if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
					t.Error("Open changed the file")
				}
			})
		}
	}
}

func TestOpenForeignDatabase(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, "store.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("other"))
		return err
	})
	db.Close()
	_, err = Open(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "not an hg store") {
		t.Errorf("Open of a bbolt database without the buckets = %v, want not an hg store", err)
	}
}

func TestOpenUnknownVersion(t *testing.T) {
	s, dir := newStore(t)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyVersion, []byte("99"))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, ro := range []bool{false, true} {
		_, err := Open(dir, &Options{ReadOnly: ro})
		if err == nil || !strings.Contains(err.Error(), `version "99"`) {
			t.Errorf("Open(ReadOnly=%v) of format version 99 = %v, want an error naming the version", ro, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, holderFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed Open left a holder file (%v)", err)
	}
}

func TestPersistence(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	blocks := []cas.Block{block("a", 10), block("b", 100000), block("c", 2<<20), cas.NewBlock(cas.Raw, nil)}
	if err := s.Put(ctx, blocks...); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPin(ctx, "root", blocks[1].CID()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil {
		t.Error("second Close: nil error")
	}
	s, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, b := range blocks {
		got, err := s.Get(ctx, b.CID())
		if err != nil || !bytes.Equal(got, b.Data()) {
			t.Errorf("Get(%s) after reopening = %d bytes, %v", b.CID(), len(got), err)
		}
	}
	pins, err := s.Pins(ctx)
	if err != nil || len(pins) != 1 || pins[0].Name != "root" || !pins[0].CID.Equals(blocks[1].CID()) {
		t.Errorf("Pins after reopening = %v, %v", pins, err)
	}
}

func TestReadOnly(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	b := block("ro", 1000)
	if err := s.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r1, err := Open(dir, &Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := Open(dir, &Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	defer r2.Close()
	if got, err := r2.Get(ctx, b.CID()); err != nil || !bytes.Equal(got, b.Data()) {
		t.Errorf("Get from a reader = %d bytes, %v", len(got), err)
	}
	for name, err := range map[string]error{
		"Put":       r1.Put(ctx, block("new", 10)),
		"Delete":    r1.Delete(ctx, b.CID()),
		"SetPin":    r1.SetPin(ctx, "p", b.CID()),
		"DeletePin": r1.DeletePin(ctx, "p"),
	} {
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s on a read-only store = %v, want a read-only error", name, err)
		}
	}
	if ok, err := r1.Has(ctx, b.CID()); !ok || err != nil {
		t.Errorf("Has after refused Delete = %v, %v", ok, err)
	}

	// A writer must wait for the readers.
	start := time.Now()
	_, err = Open(dir, &Options{Timeout: 200 * time.Millisecond})
	var busy *cas.BusyError
	if !errors.As(err, &busy) || !errors.Is(err, cas.ErrStoreBusy) {
		t.Fatalf("Open for writing while readers hold the store = %v, want a *cas.BusyError", err)
	}
	if busy.Path != dir || busy.Holder != "" {
		t.Errorf("BusyError = %+v, want Path %s and no holder", busy, dir)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open took %v to time out after 200ms", d)
	}
}

var holderLine = regexp.MustCompile(`^pid (\d+) \(hg put big\.iso\) since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

func TestBusy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".haygent")
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, &Options{Command: "hg put big.iso"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, holderFile))
	if err != nil {
		t.Fatalf("holder file: %v", err)
	}
	m := holderLine.FindStringSubmatch(strings.TrimSpace(string(raw)))
	if m == nil || m[1] != fmt.Sprint(os.Getpid()) {
		t.Errorf("holder file = %q, want pid %d (hg put big.iso) since <time>", raw, os.Getpid())
	}

	for _, ro := range []bool{false, true} {
		start := time.Now()
		_, err = Open(dir, &Options{Timeout: 200 * time.Millisecond, ReadOnly: ro})
		elapsed := time.Since(start)
		var busy *cas.BusyError
		if !errors.As(err, &busy) || !errors.Is(err, cas.ErrStoreBusy) {
			t.Fatalf("second Open(ReadOnly=%v) = %v, want a *cas.BusyError", ro, err)
		}
		if busy.Path != dir || !holderLine.MatchString(busy.Holder) || !strings.Contains(busy.Holder, fmt.Sprintf("pid %d ", os.Getpid())) {
			t.Errorf("BusyError = %+v, want Path %s and the holder line", busy, dir)
		}
		if !strings.Contains(err.Error(), "hg put big.iso") {
			t.Errorf("error %q does not say what holds the store", err)
		}
		if elapsed < 100*time.Millisecond || elapsed > 2*time.Second {
			t.Errorf("Open with Timeout 200ms failed after %v", elapsed)
		}
	}

	// A negative timeout does not wait.
	start := time.Now()
	if _, err := Open(dir, &Options{Timeout: -1}); !errors.Is(err, cas.ErrStoreBusy) {
		t.Errorf("Open with a negative timeout = %v, want cas.ErrStoreBusy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Open with a negative timeout took %v", d)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, holderFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("holder file after Close: %v", err)
	}
	s, err = Open(dir, &Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	s.Close()
}

func TestStaleHolder(t *testing.T) {
	dir := t.TempDir()
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	holder := filepath.Join(dir, holderFile)
	stale := "pid 999999999 (hg killed) since 2000-01-01T00:00:00Z\n"
	os.WriteFile(holder, []byte(stale), 0o600)
	s, err := Open(dir, &Options{Command: "hg new"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(holder); !strings.HasPrefix(string(got), fmt.Sprintf("pid %d (hg new) since ", os.Getpid())) {
		t.Errorf("a writer left the stale holder: %q", got)
	}
	s.Close()
	os.WriteFile(holder, []byte(stale), 0o600)
	r, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := os.Stat(holder); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a reader left the stale holder (%v)", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "store.db" {
			t.Errorf("left in the store directory: %s", e.Name())
		}
	}
}

func TestBusyAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := filepath.Join(t.TempDir(), ".haygent")
	if err := Init(dir); err != nil {
		t.Fatal(err)
	}
	p := startChild(t, "hold", dir)
	if line := p.next(t); line != "ready" {
		t.Fatalf("child said %q", line)
	}
	pid := p.cmd.Process.Pid

	start := time.Now()
	_, err := Open(dir, &Options{Timeout: 200 * time.Millisecond})
	elapsed := time.Since(start)
	var busy *cas.BusyError
	if !errors.As(err, &busy) {
		t.Fatalf("Open while a child process holds the store = %v, want a *cas.BusyError", err)
	}
	if !strings.HasPrefix(busy.Holder, fmt.Sprintf("pid %d (hg child hold) since ", pid)) {
		t.Errorf("BusyError.Holder = %q, want the child's pid %d", busy.Holder, pid)
	}
	if elapsed > 5*time.Second {
		t.Errorf("Open took %v to fail", elapsed)
	}
	t.Logf("%v after %v", err, elapsed)

	// The kernel drops the lock of a killed process; its holder file is
	// left behind, and the next writer replaces it.
	p.kill()
	s, err := Open(dir, &Options{Timeout: 2 * time.Second, Command: "hg after"})
	if err != nil {
		t.Fatalf("Open after the child was killed: %v", err)
	}
	defer s.Close()
	if h := readHolder(dir); !strings.HasPrefix(h, fmt.Sprintf("pid %d (hg after)", os.Getpid())) {
		t.Errorf("holder after taking over = %q", h)
	}
}

// Locate says where a block lies: inline blocks in the database file,
// packed ones in their pack, the bytes there being the block's.
func TestLocate(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t)
	defer s.Close()
	inline, packed := block("locate-inline", 5000), bigBlock(9, 100<<10)
	if err := s.Put(ctx, inline, packed); err != nil {
		t.Fatal(err)
	}
	type locateCase struct {
		b    cas.Block
		file string
	}
	checkLocate := func(tc locateCase) {
		t.Helper()
		ext, err := s.Locate(ctx, tc.b.CID())
		if err != nil {
			t.Fatal(err)
		}
		if ext.File != tc.file || ext.Inline != (tc.file == filepath.Join(dir, dbFile)) || ext.Length != int64(len(tc.b.Data())) {
			t.Fatalf("Locate(%s) = %+v, want %d bytes in %s", tc.b.CID(), ext, len(tc.b.Data()), tc.file)
		}
		f, err := os.Open(ext.File)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, ext.Length)
		_, err = f.ReadAt(got, ext.Offset)
		f.Close()
		if err != nil || !bytes.Equal(got, tc.b.Data()) {
			t.Fatalf("the bytes where Locate(%s) says it lies are not the block's (%v)", tc.b.CID(), err)
		}
	}
	tcs := []locateCase{{inline, filepath.Join(dir, dbFile)}, {packed, filepath.Join(dir, packDir, packName(1))}}
	for _, tc := range tcs {
		checkLocate(tc)
	}
	// Once the index outgrows a page, inline blocks are found through
	// its branch pages.
	var many []cas.Block
	for i := range 5000 {
		many = append(many, block(fmt.Sprint("locate-", i), 100))
	}
	if err := s.Put(ctx, many...); err != nil {
		t.Fatal(err)
	}
	for _, b := range many {
		tcs = append(tcs, locateCase{b, filepath.Join(dir, dbFile)})
	}
	for _, tc := range tcs {
		checkLocate(tc)
	}
	var nf *cas.NotFoundError
	if _, err := s.Locate(ctx, block("absent", 5).CID()); !errors.As(err, &nf) {
		t.Errorf("Locate of a missing block = %v, want a *cas.NotFoundError", err)
	}
}

// corrupt inverts the byte at offset at of block c in the closed store
// in dir, where Locate says it lies, as boltstoretest.Corrupt does.
func corrupt(t *testing.T, dir string, c cid.Cid, at int) {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ext, err := s.Locate(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := flip.Block(c, ext.File, ext.Offset, ext.Length, at); err != nil {
		t.Fatal(err)
	}
}

func TestAllKeysLetsFnWrite(t *testing.T) {
	// AllKeys holds no transaction while fn runs, so fn may write, as gc
	// may; with a transaction held, a write that grows the file would wait
	// for it forever.
	ctx := context.Background()
	s, _ := newStore(t)
	defer s.Close()
	var blocks []cas.Block
	for i := range 3 * scanBatch / 2 {
		blocks = append(blocks, block(fmt.Sprint("k", i), 100))
	}
	if err := s.Put(ctx, blocks...); err != nil {
		t.Fatal(err)
	}
	n, deleted := 0, 0
	done := make(chan error, 1)
	go func() {
		done <- s.AllKeys(ctx, func(c cid.Cid, size int) error {
			n++
			switch {
			case n%500 == 0:
				// 8 MiB: enough to grow the file and remap it.
				return s.Put(ctx, block(fmt.Sprint("big", n), 4<<20), block(fmt.Sprint("big2", n), 4<<20))
			case n%50 == 0:
				deleted++
				return s.Delete(ctx, c)
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("AllKeys with fn writing has not returned after a minute")
	}
	if n < len(blocks) {
		t.Errorf("AllKeys reported %d keys, want at least the %d stored first", n, len(blocks))
	}
	var left int
	s.AllKeys(ctx, func(cid.Cid, int) error { left++; return nil })
	if want := len(blocks) - deleted + 6; left != want {
		t.Errorf("%d blocks left, want %d", left, want)
	}
}

// A database file with a page overwritten makes bbolt panic when it meets
// the page; every operation reports ErrDamaged (an integrity failure)
// instead, and the store can still be closed and opened again.
func TestDamagedPageIsAnError(t *testing.T) {
	s, dir := newStore(t)
	ctx := context.Background()
	b := block("damage", 100)
	if err := s.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPin(ctx, "p", b.CID()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, dbFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xab}, 4096), 4*4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err = Open(dir, nil)
	if err != nil {
		if !errors.Is(err, ErrDamaged) {
			t.Fatalf("Open: %v, want ErrDamaged or success", err)
		}
		return
	}
	defer s.Close()
	damaged := 0
	check := func(op string, err error) {
		if errors.Is(err, ErrDamaged) {
			if !errors.Is(err, cas.ErrCorrupt) {
				t.Errorf("%s: %v does not wrap ErrCorrupt", op, err)
			}
			damaged++
		}
	}
	_, err = s.Pins(ctx)
	check("Pins", err)
	_, err = s.Get(ctx, b.CID())
	check("Get", err)
	check("AllKeys", s.AllKeys(ctx, func(cid.Cid, int) error { return nil }))
	check("Put", s.Put(ctx, block("more", 200)))
	if damaged == 0 {
		t.Fatal("no operation met the damaged page")
	}
}
