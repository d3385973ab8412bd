// Package boltstore is a [cas.Store] kept in one bbolt database file: the
// store hg uses on disk.
//
// # Layout
//
// A store is a directory (the CLI's .haygent/) made by [Init], holding:
//
//	store.db   the bbolt database
//	packs/     the pack files, NNNNNNNN.pack, each with its sidecar
//	           NNNNNNNN.packidx, and inline.packidx (sidecar.go)
//	holder     "pid 1234 (hg put big.iso) since 2026-11-29T22:00:00Z":
//	           who has the store open for writing; present only while a
//	           writer holds it (or after a writer was killed)
//
// The database has five buckets:
//
//	blocks   key: the binary CID; value: the block's bytes, or where it
//	         lies in a pack file (packs/00000001.pack, ...)
//	pins     key: the pin name;   value: the binary CID it points at
//	refs     a bucket per namespace: name -> binary CID
//	packs    key: the pack number; value: its counts and committed end
//	meta     key "version": the format version, "1"; "pack": the pack
//	         being filled
//
// [Open] refuses a database without these buckets or with another format
// version.
//
// # Locking
//
// bbolt flocks store.db: a writer holds an exclusive lock, a store opened
// with [Options.ReadOnly] a shared one, so any number of readers or one
// writer use the store at a time. [Open] waits up to [Options.Timeout] for
// the lock and then fails with a [*cas.BusyError] that quotes the holder
// file. The kernel drops the lock when a process dies, so a killed hg
// never leaves the store locked; it only leaves a stale holder file, which
// the next writer overwrites and the next reader removes.
//
// # Reads
//
// Get and View hash the stored bytes and return a [*cas.CorruptError] if
// they do not match the CID. View hands fn the bytes in place, in the
// read-only memory map of the database, without copying them. On Linux,
// once fn returns, View (and Get) drop the mapping of the pages that lie
// wholly inside a large value (64 KiB and more), so that streaming a large
// file through View does not grow the resident set by the file's size: the
// pages stay in the page cache and fault back in if read again.
//
// # Writes
//
// Put and Delete are one bbolt transaction each, synced to disk before
// they return: after a crash either all of a Put's blocks are stored or
// none is. Put skips blocks already present.
//
// # Space
//
// Blocks of 128 bytes and more live in pack files beside the database
// (pack.go), except the small ones (under 64 KiB) of a Put whose small
// blocks add up to less than 256 KiB, which stay inline; the packs bucket keeps counts of each, which are only a cache
// of the index. Delete removes index entries and never touches a file;
// [Store.Compact] (which gc runs) gives the space back, and a writer's
// recovery at Open cleans up after a crash. Both decide from a read of the
// whole index in the transaction that decides, never from the counts: a
// pack file goes only if no entry points into it, and is cut only after
// its last block. Compact also rewrites packs that are mostly dead space
// (copy, switch the index in one transaction, remove after the commit),
// safe to kill at any point.
//
// # Checking
//
// [Store.CheckStore] checks what re-hashing blocks cannot see: the
// database file page by page, then bbolt's own Tx.Check; the index
// entries, the packs' counts and files, the pins and refs. [Open] reads
// what bbolt would trust at once before bbolt does (dbfile.go), and every
// panic or fault of bbolt's becomes an error wrapping [ErrDamaged].
// [Repair] rebuilds a damaged database from what can still be read of it,
// and rebuilds the index entries it lacks from the sidecars: beside each
// pack, an append-only record of the CID, offset and length of every
// block written into it (and, for blocks kept inline, one file of their
// records with their bytes), each record checked against the bytes it
// points at before it counts.
//
// # Testing
//
// [Store.Locate] says where a block's bytes lie on disk, and
// cas/boltstore/boltstoretest damages a block there, as a failing disk
// would; [SetPackCounts] writes a pack's counts. Both are for the tests of
// the code that must catch the damage.
package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Names of files in the store directory, buckets and keys in the database:
// the whole on-disk layout.
const (
	dbFile     = "store.db"
	holderFile = "holder"

	formatVersion = "1"
)

var (
	bucketBlocks = []byte("blocks")
	bucketPins   = []byte("pins")
	bucketRefs   = []byte("refs") // one nested bucket per namespace
	bucketMeta   = []byte("meta")
	keyVersion   = []byte("version")
)

// DefaultTimeout is how long [Open] waits for the lock when
// [Options.Timeout] is zero.
const DefaultTimeout = 3 * time.Second

// Forever, as [Options.Timeout], makes Open wait for the lock as long as
// another process holds it.
const Forever time.Duration = math.MaxInt64

// scanBatch is how many keys AllKeys reads in one read transaction.
const scanBatch = 1000

// ctxCheckEvery is how many blocks Put and Delete handle between two
// checks of the context.
const ctxCheckEvery = 256

// Options tunes [Open]. A nil *Options means the zero value.
type Options struct {
	// ReadOnly opens the store for reading only, under a shared lock, so
	// that several commands that only read can run at once. Writes fail.
	ReadOnly bool

	// Timeout is how long Open waits for another process to release the
	// lock before it fails with a [*cas.BusyError]. Zero means
	// [DefaultTimeout]; a negative value means not to wait at all;
	// [Forever], as long as it takes.
	Timeout time.Duration

	// Command is what the holder file says is running, such as
	// "hg put big.iso", for the error another process gets while this one
	// holds the store. Only writers write the holder file.
	Command string
}

// Store is a [cas.Store] on a bbolt database. Make one with [Open].
//
// All its methods are safe for concurrent use, and all return ctx.Err()
// without doing anything if ctx is already done. The methods that write
// fail on a store opened with [Options.ReadOnly]. After [Store.Close],
// every method fails.
type Store struct {
	db       *bolt.DB
	dir      string
	readOnly bool
	packs    *packs
	wmu      sync.Mutex // one Put or Delete at a time: they share the pack being filled

	mu     sync.RWMutex // guards closed against Close
	closed bool
}

var _ cas.Store = (*Store)(nil)

// errEmptyDB is returned by openExisting for a zero-length database file,
// which bbolt would otherwise initialise.
var errEmptyDB = errors.New("store.db is empty")

// writeBufs holds the buffers a Put gathers small blocks in, across
// Stores: a scheduler opens the store for each commit, and a buffer kept
// by one Store was made anew, doubling as it grew, by every commit.
var writeBufs sync.Pool // of *[]byte

// writeBufMax bounds the buffer a Put gathers small blocks in: a bigger
// batch is written in several calls, rather than copied whole into fresh
// memory first.
const writeBufMax = 4 << 20

// getWriteBuf returns an empty buffer that holds n bytes.
func getWriteBuf(n int) []byte {
	if p, ok := writeBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// putWriteBuf keeps buf for a later Put, unless it is very large.
func putWriteBuf(buf []byte) {
	if cap(buf) <= writeBufMax {
		buf = buf[:0]
		writeBufs.Put(&buf)
	}
}

// boltOptions are the options of every bbolt database this package opens.
// A map freelist stays fast when many large values have been freed; fsync
// stays on.
func boltOptions(readOnly bool, timeout time.Duration) *bolt.Options {
	return &bolt.Options{
		Timeout:      timeout,
		ReadOnly:     readOnly,
		FreelistType: bolt.FreelistMapType,
		OpenFile:     openExisting,
	}
}

// openExisting opens the database file without creating it: Open must not
// make a store where there is none, and Init creates the file itself.
func openExisting(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag&^os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil {
		f.Close()
		return nil, err
	} else if fi.Size() == 0 {
		f.Close()
		return nil, errEmptyDB
	}
	return f, nil
}

// Init makes a new, empty store in dir, creating dir (mode 0700) if need
// be. It fails with an error wrapping [fs.ErrExist] if dir already holds a
// store.
func Init(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("init store: %w", err)
	}
	path := filepath.Join(dir, dbFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("init store: a store already exists at %s: %w", dir, fs.ErrExist)
	}
	if err != nil {
		return fmt.Errorf("init store: %w", err)
	}
	f.Close()
	syncDir(dir)
	if err := initDB(path); err != nil {
		os.Remove(path)
		return fmt.Errorf("init store at %s: %w", dir, err)
	}
	return nil
}

// initDB lays out the buckets in the empty file at path.
func initDB(path string) error {
	opts := boltOptions(false, DefaultTimeout)
	opts.OpenFile = nil // the file is empty: let bbolt initialise it
	db, err := bolt.Open(path, 0o600, opts)
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketBlocks, bucketPins, bucketMeta, bucketPacks, bucketRefs} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(keyVersion, []byte(formatVersion))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir makes a new directory entry in dir durable, where the system
// allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// Open opens the store in dir, made by [Init]; opts may be nil.
//
// A missing store is an error wrapping [cas.ErrNotFound]. If another
// process holds the store (a writer, or readers when opening for
// writing), Open waits for up to opts.Timeout and then returns a
// [*cas.BusyError], which wraps [cas.ErrStoreBusy]. A database file that
// is not an hg store, or is of an unknown format version, is an error.
//
// A writer writes the holder file, which Close removes.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	path := filepath.Join(dir, dbFile)
	if err := precheck(path, !o.ReadOnly); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	wait := o.Timeout
	if wait == Forever {
		wait = 0 // bbolt's forever
	}
	db, err := openBolt(path, boltOptions(o.ReadOnly, wait))
	switch {
	case err == nil:
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &cas.BusyError{Path: dir, Holder: readHolder(dir)}
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("no store at %s: %w", dir, cas.ErrNotFound)
	case errors.Is(err, errEmptyDB):
		return nil, fmt.Errorf("open store %s: %s is empty: the store was never initialised, or is being initialised", dir, path)
	case errors.As(err, new(*fs.PathError)), errors.Is(err, ErrDamaged):
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	default:
		// bbolt's own errors (invalid database, version mismatch,
		// checksum error, file size too small) name no file.
		return nil, fmt.Errorf("open store %s: %s is not a bbolt database, or is damaged: %w (%w)", dir, path, ErrDamaged, err)
	}
	if err := checkLayout(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	s := &Store{db: db, dir: dir, readOnly: o.ReadOnly, packs: newPacks(dir, o.ReadOnly)}
	if !o.ReadOnly {
		if err := s.packs.recover(db); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: recover packs: %w", dir, err)
		}
	}
	if o.ReadOnly {
		// No writer holds the lock now, so a holder file is stale.
		_ = os.Remove(filepath.Join(dir, holderFile))
	} else {
		writeHolder(dir, o.Command)
	}
	return s, nil
}

// checkLayout checks that db has the buckets and format version of a
// store.
func checkLayout(db *bolt.DB) error {
	return view(db, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%s is not an hg store: it has no %q bucket", db.Path(), bucketMeta)
		}
		v := meta.Get(keyVersion)
		if v == nil {
			return fmt.Errorf("%s is not an hg store: it has no format version", db.Path())
		}
		if string(v) != formatVersion {
			return fmt.Errorf("%s has store format version %q; this hg reads only version %s", db.Path(), v, formatVersion)
		}
		for _, name := range [][]byte{bucketBlocks, bucketPins, bucketPacks, bucketRefs} {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("%s is damaged: it has no %q bucket", db.Path(), name)
			}
		}
		return nil
	})
}

// writeHolder writes the holder file atomically. It is only a courtesy to
// other processes, so failures are ignored.
func writeHolder(dir, command string) {
	line := fmt.Sprintf("pid %d", os.Getpid())
	if command != "" {
		line += " (" + command + ")"
	}
	line += " since " + time.Now().UTC().Format(time.RFC3339) + "\n"
	f, err := os.CreateTemp(dir, "."+holderFile+"-*")
	if err != nil {
		return
	}
	_, werr := f.WriteString(line)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(dir, holderFile)) != nil {
		os.Remove(f.Name())
	}
}

// readHolder returns the holder file's line, or "" if there is none.
func readHolder(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, holderFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Path returns the store directory, as given to [Open].
func (s *Store) Path() string { return s.dir }

var errClosed = errors.New("boltstore: store is closed")

// begin checks ctx and that the store is open, and keeps it open until the
// returned func is called.
func (s *Store) begin(ctx context.Context, write bool) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, errClosed
	}
	if write && s.readOnly {
		s.mu.RUnlock()
		return nil, fmt.Errorf("store %s is open read-only", s.dir)
	}
	return s.mu.RUnlock, nil
}

// Has reports whether the block is stored, without reading or verifying
// it.
func (s *Store) Has(ctx context.Context, c cid.Cid) (bool, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return false, err
	}
	defer end()
	var ok bool
	err = view(s.db, func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketBlocks).Get(c.Bytes()) != nil
		return nil
	})
	return ok, err
}

// Get returns a verified copy of the block's bytes: a [*cas.NotFoundError]
// if it is missing, a [*cas.CorruptError] if its bytes do not hash to c.
func (s *Store) Get(ctx context.Context, c cid.Cid) ([]byte, error) {
	var out []byte
	err := s.View(ctx, c, func(data []byte) error {
		out = bytes.Clone(data)
		if out == nil {
			out = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// View calls fn with the block's verified bytes, in place in the memory
// map of the database: they are valid only until fn returns and must not
// be modified (the mapping is read-only: writing faults). A missing block
// is a [*cas.NotFoundError], a corrupt one a [*cas.CorruptError]; fn is
// not called then. Otherwise View returns fn's error.
//
// A read transaction is open while fn runs, and a write that has to grow
// the database file waits for every open one. So fn must not call the
// store's methods, nor wait for another goroutine that writes to it: a
// write would wait for fn forever, and a nested read can queue behind a
// waiting write. Code that needs the store while it holds a block's bytes
// should copy them with [Store.Get].
func (s *Store) View(ctx context.Context, c cid.Cid, fn func(data []byte) error) error {
	end, err := s.begin(ctx, false)
	if err != nil {
		return err
	}
	defer end()
	var (
		loc    location
		packed bool
	)
	err = view(s.db, func(tx *bolt.Tx) error {
		e, _, err := lookup(tx, c)
		if err != nil {
			return err
		}
		if e.packed {
			loc, packed = e.loc, true
			return nil
		}
		if err := cas.Verify(c, e.inline); err != nil {
			return err
		}
		return fn(e.inline)
	})
	if err != nil || !packed {
		return err
	}
	buf := getReadBuf()
	data, err := s.packs.read(loc, buf)
	if err != nil {
		return fmt.Errorf("block %s: %w", c, err)
	}
	defer putReadBuf(data)
	if err := cas.Verify(c, data); err != nil {
		return err
	}
	return fn(data)
}

// lookup returns the index entry of c, and its value in the database,
// valid only during tx. A missing block is a [*cas.NotFoundError].
func lookup(tx *bolt.Tx, c cid.Cid) (entry, []byte, error) {
	v := tx.Bucket(bucketBlocks).Get(c.Bytes())
	if v == nil {
		return entry{}, nil, &cas.NotFoundError{CID: c}
	}
	e, err := decodeEntry(v)
	if err != nil {
		return entry{}, nil, fmt.Errorf("block %s: %w", c, err)
	}
	return e, v, nil
}

// Extent is where a stored block's bytes lie on disk: Length bytes at
// Offset in File.
type Extent struct {
	// File is the path of a pack file (the store directory joined with
	// packs/NNNNNNNN.pack), or of the database file, store.db, for a
	// block kept inline.
	File   string
	Offset int64
	Length int64
	// Inline tells that the block is kept inline, in a page of the
	// database; it lies there only until the next write to the store,
	// which may copy the page elsewhere.
	Inline bool
}

// Locate reports where the block c lies on disk, for tools and tests
// that look at the files themselves (a test damages a block there as a
// failing disk would). It reads the index alone: it neither reads nor
// verifies the block. A missing block is a [*cas.NotFoundError].
func (s *Store) Locate(ctx context.Context, c cid.Cid) (Extent, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return Extent{}, err
	}
	defer end()
	var ext Extent
	err = view(s.db, func(tx *bolt.Tx) error {
		e, v, err := lookup(tx, c)
		if err != nil {
			return err
		}
		if e.packed {
			ext = Extent{File: s.packs.path(e.loc.pack), Offset: int64(e.loc.offset), Length: int64(e.loc.length)}
			return nil
		}
		// Where the tree in the file holds the entry: its pages stay
		// put while this transaction is open.
		off, err := dbValueAt(s.db.Path(), [][]byte{bucketBlocks}, c.Bytes(), v)
		if err != nil {
			return fmt.Errorf("block %s: %w", c, err)
		}
		ext = Extent{File: s.db.Path(), Offset: off + 1, Length: int64(len(e.inline)), Inline: true}
		return nil
	})
	return ext, err
}

// errNothingNew rolls back a Put whose blocks were all present already,
// so that it costs no commit and no sync.
var errNothingNew = errors.New("nothing new")

// readBufs recycles the buffers packed blocks are read into, so reading a
// large file touches the same few MiB of memory again and again. (A
// sync.Pool loses its buffers at every garbage collection, and faulting
// in fresh pages costs more than the reads.)
var readBufs = make(chan []byte, 16)

func getReadBuf() []byte {
	select {
	case b := <-readBufs:
		return b[:0]
	default:
		return make([]byte, 0, cas.ChunkSize)
	}
}

func putReadBuf(b []byte) {
	if cap(b) != cas.ChunkSize {
		return
	}
	select {
	case readBufs <- b[:0]:
	default:
	}
}

// Put stores the blocks in one transaction, synced to disk before it
// returns: after a crash either all of them are stored or none is. Blocks
// already present are skipped. A cancelled ctx rolls the whole Put back.
// A block over [cas.MaxBlockSize] is refused, and then none is stored.
func (s *Store) Put(ctx context.Context, blocks ...cas.Block) error {
	if err := cas.CheckBlockSizes(blocks...); err != nil {
		return err
	}
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	if len(blocks) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	// The index is read and written in key order, the pack in the order
	// given (a file's chunks stay in file order). bbolt inserts into a
	// leaf by shifting the entries after the new one, and splits leaves
	// only at commit: a batch of thousands of keys in random order into a
	// small tree moved memory quadratically, while keys in order land
	// after the ones before them.
	order := make([]int, len(blocks))
	keys := make([][]byte, len(blocks))
	for i, b := range blocks {
		order[i], keys[i] = i, b.CID().Bytes()
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
	// Small blocks go to the pack only in a Put with enough of them to
	// be worth the pack's fsync: a single invocation's few blocks stay
	// inline, a scheduler's commit of thousands goes to the pack.
	smallBytes := 0
	for _, b := range blocks {
		if n := len(b.Data()); n >= packMin && n < packBuffered {
			smallBytes += n
		}
	}
	packSmall := smallBytes >= packSmallMin
	err = update(s.db, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlocks)
		// fresh[i] tells whether blocks[i] is to be stored: not stored
		// already, nor given before in this Put. values[i] is what the
		// index gets for it.
		fresh := make([]bool, len(blocks))
		values := make([][]byte, len(blocks))
		inserted := 0
		for j, i := range order {
			if j%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if j > 0 && bytes.Equal(keys[i], keys[order[j-1]]) || bk.Get(keys[i]) != nil {
				continue
			}
			fresh[i] = true
			inserted++
		}
		if inserted == 0 {
			return errNothingNew // roll back: no commit, no sync
		}
		cur := currentPack(tx)
		ps, _ := getPackStat(tx, cur)
		stats := map[uint64]packStat{}
		var written []*os.File
		var f *os.File
		// Small blocks bound for the pack are gathered and written with
		// one call; bufAt is the pack offset buf starts at.
		buf := getWriteBuf(min(smallBytes, writeBufMax))
		defer func() { putWriteBuf(buf) }()
		var scratch []byte // aligned copies for direct writes
		var recs []byte    // the sidecar records of the blocks written to cur
		var inl []byte     // the records of the blocks kept inline
		var bufAt uint64
		flushBuf := func() error {
			if len(buf) == 0 {
				return nil
			}
			_, err := f.WriteAt(buf, int64(bufAt))
			buf = buf[:0]
			return err
		}
		for i, b := range blocks {
			if i%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if !fresh[i] {
				continue
			}
			data := b.Data()
			if len(data) < packMin || len(data) < packBuffered && !packSmall {
				values[i] = inlineValue(data)
				inl = appendInlineRecord(inl, b.CID(), data)
				continue
			}
			if ps.end >= packMax {
				if err := flushBuf(); err != nil {
					return fmt.Errorf("write pack %d: %w", cur, err)
				}
				if err := s.packs.appendSidecar(cur, recs); err != nil {
					return err
				}
				recs = recs[:0]
				stats[cur] = ps
				s.packs.closeDirect(cur) // full: no more writes to it
				s.packs.closeSidecar(cur)
				cur++
				ps, _ = getPackStat(tx, cur)
				f = nil
			}
			if f == nil {
				var err error
				if f, err = s.packs.file(cur, true); err != nil {
					return err
				}
				written = append(written, f)
				// Never below what the file holds: the counts are a
				// cache, and a committed end written short of the last
				// block would have this Put write over it.
				if info, err := f.Stat(); err == nil && uint64(info.Size()) > ps.end {
					ps.end = uint64(info.Size())
				}
			}
			// Data goes to the pack before the transaction that points at it
			// commits; a Put that dies leaves bytes past the committed end,
			// which the next writer cuts off. It lies at off and takes span
			// bytes of the pack (a large block written directly is aligned
			// and padded).
			off, span := ps.end, uint64(len(data))
			if len(data) < packBuffered {
				if len(buf) > 0 && len(buf)+len(data) > cap(buf) {
					if err := flushBuf(); err != nil {
						return fmt.Errorf("write pack %d: %w", cur, err)
					}
				}
				if len(buf) == 0 {
					bufAt = ps.end
				}
				buf = append(buf, data...)
			} else {
				if err := flushBuf(); err != nil {
					return fmt.Errorf("write pack %d: %w", cur, err)
				}
				var err error
				if off, span, err = s.packs.writeLarge(f, cur, data, ps.end, &scratch); err != nil {
					return fmt.Errorf("put block %s: %w", b.CID(), err)
				}
			}
			loc := location{pack: cur, offset: off, length: uint64(len(data))}
			recs = appendRecord(recs, b.CID(), loc)
			ps.end = off + span
			ps.live++
			ps.liveBytes += loc.length
			values[i] = loc.encode()
		}
		for j, i := range order {
			if j%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if !fresh[i] {
				continue
			}
			if err := bk.Put(keys[i], values[i]); err != nil {
				return fmt.Errorf("put block %s: %w", blocks[i].CID(), err)
			}
		}
		if err := s.packs.appendInline(inl); err != nil {
			return err
		}
		if len(written) == 0 {
			return ctx.Err()
		}
		if err := flushBuf(); err != nil {
			return fmt.Errorf("write pack %d: %w", cur, err)
		}
		if err := s.packs.appendSidecar(cur, recs); err != nil {
			return err
		}
		stats[cur] = ps
		for _, f := range written {
			if err := f.Sync(); err != nil {
				return fmt.Errorf("sync pack: %w", err)
			}
		}
		for n, ps := range stats {
			if err := putPackStat(tx, n, ps); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keyPackCur, []byte(strconv.FormatUint(cur, 10))); err != nil {
			return err
		}
		return ctx.Err()
	})
	if errors.Is(err, errNothingNew) {
		return nil
	}
	return err
}

// Delete removes the blocks that are present, in one transaction. Only
// garbage collection (and an import undoing itself) should call it.
//
// Delete only removes index entries and lowers the counts of the packs
// they pointed into; it never removes or cuts a pack file. The space goes
// back when [Store.Compact] runs (gc runs it after its sweep), or when
// the next writer's recovery finds a pack nothing points into; both
// decide from the index itself, never from the counts.
func (s *Store) Delete(ctx context.Context, cids ...cid.Cid) error {
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	if len(cids) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return update(s.db, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketBlocks)
		stats := map[uint64]packStat{}
		for i, c := range cids {
			if i%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			v := bk.Get(c.Bytes())
			if v == nil {
				continue
			}
			if e, err := decodeEntry(v); err == nil && e.packed {
				ps, ok := stats[e.loc.pack]
				if !ok {
					ps, _ = getPackStat(tx, e.loc.pack)
				}
				// Counts that were wrong stay at zero rather than
				// wrap around.
				ps.live -= min(ps.live, 1)
				ps.liveBytes -= min(ps.liveBytes, e.loc.length)
				stats[e.loc.pack] = ps
			}
			if err := bk.Delete(c.Bytes()); err != nil {
				return fmt.Errorf("delete block %s: %w", c, err)
			}
		}
		for n, ps := range stats {
			if err := putPackStat(tx, n, ps); err != nil {
				return err
			}
		}
		return ctx.Err()
	})
}

// AllKeys calls fn with the CID and stored size of every block, in the
// byte order of the binary CIDs, without reading the blocks' bytes. If fn
// returns an error, AllKeys stops and returns it; a cancelled ctx stops it
// between blocks with ctx.Err().
//
// A damaged index does not stop it: an entry whose value does not decode
// is reported with size -1 (View of it returns the error), and a key that
// is no CID is passed over; [Store.CheckStore] names both.
//
// AllKeys reads the keys in batches and holds no transaction open while fn
// runs, so fn may use the store; a block put or deleted during the scan
// may or may not be reported.
func (s *Store) AllKeys(ctx context.Context, fn func(c cid.Cid, size int) error) error {
	type keyEntry struct {
		c    cid.Cid
		size int
	}
	batch := make([]keyEntry, 0, scanBatch)
	var after []byte // the last key read
	for {
		end, err := s.begin(ctx, false)
		if err != nil {
			return err
		}
		batch = batch[:0]
		read, done := 0, false
		err = view(s.db, func(tx *bolt.Tx) error {
			cur := tx.Bucket(bucketBlocks).Cursor()
			var k, v []byte
			if after == nil {
				k, v = cur.First()
			} else if k, v = cur.Seek(after); bytes.Equal(k, after) {
				k, v = cur.Next()
			}
			for ; k != nil && read < scanBatch; k, v = cur.Next() {
				read++
				after = append(after[:0], k...)
				c, err := cas.CastCID(k)
				if err != nil {
					continue // no CID to report it under; CheckStore names it
				}
				size := -1 // an entry that does not decode: View says why
				if e, err := decodeEntry(v); err == nil {
					size = e.size()
				}
				batch = append(batch, keyEntry{c, size})
			}
			done = k == nil
			return nil
		})
		end()
		if err != nil {
			return err
		}
		for _, e := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(e.c, e.size); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// SetPin makes name point at c, replacing any earlier target. The name
// must pass [cas.CheckPinName]; c need not be stored.
func (s *Store) SetPin(ctx context.Context, name string, c cid.Cid) error {
	if err := cas.CheckPinName(name); err != nil {
		return err
	}
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPins).Put([]byte(name), c.Bytes())
	})
}

// DeletePin removes the pin; a missing pin is an error wrapping
// [cas.ErrNotFound].
func (s *Store) DeletePin(ctx context.Context, name string) error {
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPins)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
		}
		return b.Delete([]byte(name))
	})
}

// Pin returns the CID the pin name points at, from a single lookup; a
// missing pin is an error wrapping [cas.ErrNotFound].
func (s *Store) Pin(ctx context.Context, name string) (cid.Cid, error) {
	return s.getName(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketPins) }, name, func() error {
		return fmt.Errorf("pin %q: %w", name, cas.ErrNotFound)
	})
}

// Pins returns every pin, sorted by name.
func (s *Store) Pins(ctx context.Context) ([]cas.Pin, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer end()
	var out []cas.Pin
	err = view(s.db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPins).ForEach(func(k, v []byte) error {
			c, err := cas.CastCID(v)
			if err != nil {
				return fmt.Errorf("store %s: pin %q: %w", s.dir, k, err)
			}
			out = append(out, cas.Pin{Name: string(k), CID: c})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []cas.Pin{}
	}
	return out, nil
}

// SetRef makes ns/name point at c, in one synced transaction.
func (s *Store) SetRef(ctx context.Context, ns, name string, c cid.Cid) error {
	return s.SetRefs(ctx, cas.Ref{NS: ns, Name: name, CID: c})
}

// SetRefs sets every ref in one synced transaction: all or none.
func (s *Store) SetRefs(ctx context.Context, refs ...cas.Ref) error {
	if err := cas.CheckRefs(refs); err != nil {
		return err
	}
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		for _, r := range refs {
			b, err := tx.Bucket(bucketRefs).CreateBucketIfNotExists([]byte(r.NS))
			if err != nil {
				return err
			}
			if err := b.Put([]byte(r.Name), r.CID.Bytes()); err != nil {
				return err
			}
		}
		return nil
	})
}

// GetRef returns the CID ns/name points at.
func (s *Store) GetRef(ctx context.Context, ns, name string) (cid.Cid, error) {
	return s.getName(ctx, func(tx *bolt.Tx) *bolt.Bucket { return tx.Bucket(bucketRefs).Bucket([]byte(ns)) }, name, func() error {
		return fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
	})
}

// getName returns the CID stored under name in the bucket that in finds
// (nil if there is none): one lookup in one read transaction. A missing
// name is the error notFound returns.
func (s *Store) getName(ctx context.Context, in func(*bolt.Tx) *bolt.Bucket, name string, notFound func() error) (cid.Cid, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return cid.Undef, err
	}
	defer end()
	var c cid.Cid
	err = view(s.db, func(tx *bolt.Tx) error {
		var v []byte
		if b := in(tx); b != nil {
			v = b.Get([]byte(name))
		}
		if v == nil {
			return notFound()
		}
		var err error
		c, err = cas.CastCID(v)
		return err
	})
	return c, err
}

// DeleteRef removes ns/name.
func (s *Store) DeleteRef(ctx context.Context, ns, name string) error {
	end, err := s.begin(ctx, true)
	if err != nil {
		return err
	}
	defer end()
	return update(s.db, func(tx *bolt.Tx) error {
		refs := tx.Bucket(bucketRefs)
		b := refs.Bucket([]byte(ns))
		if b == nil || b.Get([]byte(name)) == nil {
			return fmt.Errorf("ref %s/%s: %w", ns, name, cas.ErrNotFound)
		}
		if err := b.Delete([]byte(name)); err != nil {
			return err
		}
		if k, _ := b.Cursor().First(); k == nil {
			return refs.DeleteBucket([]byte(ns))
		}
		return nil
	})
}

// Refs returns the refs of ns, sorted by name.
func (s *Store) Refs(ctx context.Context, ns string) ([]cas.Pin, error) {
	if err := cas.CheckRefNamespace(ns); err != nil {
		return nil, err
	}
	end, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer end()
	out := []cas.Pin{}
	err = view(s.db, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRefs).Bucket([]byte(ns))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			c, err := cas.CastCID(v)
			if err != nil {
				return fmt.Errorf("store %s: ref %s/%s: %w", s.dir, ns, k, err)
			}
			out = append(out, cas.Pin{Name: string(k), CID: c})
			return nil
		})
	})
	return out, err
}

// RefNamespaces returns the namespaces holding refs, sorted.
func (s *Store) RefNamespaces(ctx context.Context) ([]string, error) {
	end, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer end()
	out := []string{}
	err = view(s.db, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRefs).ForEachBucket(func(k []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	return out, err
}

// Close waits for the calls in progress, removes the holder file if this
// is a writer, and releases the database and its lock. Using the store
// afterwards, and closing it again, is an error.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.closed = true
	if !s.readOnly {
		// Before the lock goes: a holder file seen under the lock is live.
		_ = os.Remove(filepath.Join(s.dir, holderFile))
	}
	perr := s.packs.close()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.dir, err)
	}
	if perr != nil {
		return fmt.Errorf("close store %s: %w", s.dir, perr)
	}
	return nil
}

// ErrDamaged is wrapped by the errors of a store whose database file is
// damaged: bbolt found a page that is not what the file says it is. It
// wraps [cas.ErrCorrupt], an integrity failure.
var ErrDamaged error = damaged{}

type damaged struct{}

func (damaged) Error() string        { return "the database file is damaged" }
func (damaged) Is(target error) bool { return target == cas.ErrCorrupt }

// view and update run a bbolt transaction. bbolt panics on a page that is
// not what the file says it is (a damaged database), and a read through
// its memory map past the end of the file faults; the fault is made a
// panic (debug.SetPanicOnFault), the transaction rolled back, its lock
// released, and the panic becomes an error that wraps [ErrDamaged], so
// that a command reports it instead of crashing.
func view(db *bolt.DB, fn func(*bolt.Tx) error) (err error) {
	defer recoverDamage(db.Path(), &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.View(fn)
}

func update(db *bolt.DB, fn func(*bolt.Tx) error) (err error) {
	defer recoverDamage(db.Path(), &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.Update(fn)
}

// openBolt is bolt.Open with its panics and faults made errors, as in
// view. (precheck has turned away the damage known to make it panic.)
func openBolt(path string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer recoverDamage(path, &err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return bolt.Open(path, 0o600, opts)
}

func recoverDamage(path string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: %w (bbolt: %v)", path, ErrDamaged, r)
	}
}
