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
//	blocks   key: the binary CID; value: a tag byte, then either the
//	         block's bytes (0x00: kept inline) or where it lies in a
//	         pack file (0x01: pack number, offset, length, uvarints)
//	pins     key: the pin name; value: the binary CID it points at
//	refs     a nested bucket per namespace: name -> binary CID
//	packs    key: the pack number (8 bytes, big-endian); value: its live
//	         blocks, live bytes and committed end (uvarints), a cache of
//	         the index
//	meta     key "version": the format version, "1"; key "pack": the
//	         number of the pack being filled, in decimal
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
// they do not match the CID. View hands fn the bytes of a block kept
// inline in place, in the read-only memory map of the database, without
// copying them; a packed block it reads with pread into a buffer used
// again and again, so that streaming a large file through View does not
// grow the resident set by the file's size.
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
// (pack.go, written through packwriter.go), except the small ones (under
// 64 KiB) of a Put whose small blocks add up to less than 256 KiB, which
// stay inline; the packs bucket keeps counts of each, which are only a
// cache of the index. Delete removes index entries and never touches a file;
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
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
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

func (damaged) Error() string { return "the database file is damaged" }

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
