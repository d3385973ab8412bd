package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strings"
)

// bbolt trusts its file: a page number past the end of the file faults
// the process through the memory map, and a page that is not what its
// parent says it is panics, in bbolt's own goroutine when it is
// Tx.Check's. So before bbolt reads a file, hg reads the parts of it that
// bbolt would trust, through plain reads: at every Open the meta pages,
// the length of the file and the freelist page (precheck), and in fsck
// every page reachable from the meta page (checkDBFile), before bbolt's
// own Tx.Check runs.

// The parts of bbolt's file format (go.etcd.io/bbolt/internal/common)
// that hg checks.
const (
	pageHeaderSize = 16 // id u64, flags u16, count u16, overflow u32
	elemSize       = 16 // a branch or leaf element
	bucketHdrSize  = 16 // a bucket's root page u64 and sequence u64

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagMeta     = 0x04
	flagFreelist = 0x10
	flagBucket   = 0x01 // of a leaf element

	boltMagic   = 0xED0CDAED
	boltVersion = 2
	noFreelist  = ^uint64(0)
	maxPageSize = 1 << 20 // sanity bound on a meta page's page size
)

// dbMeta is the meta page bbolt would use.
type dbMeta struct {
	pageSize uint64
	root     uint64 // the root bucket's page
	freelist uint64 // noFreelist when the freelist is not kept in the file
	pgid     uint64 // the high-water mark: pages below it are in use or free
	txid     uint64
}

// parseMeta decodes and validates the meta page that starts at b.
func parseMeta(b []byte) (dbMeta, error) {
	if len(b) < pageHeaderSize+64 {
		return dbMeta{}, errors.New("short meta page")
	}
	if binary.LittleEndian.Uint16(b[8:])&flagMeta == 0 {
		return dbMeta{}, errors.New("not a meta page")
	}
	m := b[pageHeaderSize:]
	switch {
	case binary.LittleEndian.Uint32(m) != boltMagic:
		return dbMeta{}, errors.New("bad magic number")
	case binary.LittleEndian.Uint32(m[4:]) != boltVersion:
		return dbMeta{}, errors.New("unknown bbolt version")
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != binary.LittleEndian.Uint64(m[56:]) {
		return dbMeta{}, errors.New("checksum mismatch")
	}
	meta := dbMeta{
		pageSize: uint64(binary.LittleEndian.Uint32(m[8:])),
		root:     binary.LittleEndian.Uint64(m[16:]),
		freelist: binary.LittleEndian.Uint64(m[32:]),
		pgid:     binary.LittleEndian.Uint64(m[40:]),
		txid:     binary.LittleEndian.Uint64(m[48:]),
	}
	if meta.pageSize < 512 || meta.pageSize > maxPageSize || meta.pageSize&(meta.pageSize-1) != 0 {
		return dbMeta{}, fmt.Errorf("page size %d", meta.pageSize)
	}
	return meta, nil
}

// readMeta returns the meta page bbolt would use: the valid one of the
// two with the higher transaction id.
func readMeta(f *os.File) (dbMeta, error) {
	metas, err := readMetas(f)
	if err != nil {
		return dbMeta{}, err
	}
	return metas[0], nil
}

// readMetas returns the valid meta pages, the newer first.
func readMetas(f *os.File) ([]dbMeta, error) {
	first := make([]byte, 4096)
	n, err := f.ReadAt(first, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	m0, err0 := parseMeta(first[:n])
	size := uint64(4096)
	if err0 == nil {
		size = m0.pageSize
	}
	second := make([]byte, 4096)
	n, err = f.ReadAt(second, int64(size))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	m1, err1 := parseMeta(second[:n])
	switch {
	case err0 == nil && err1 == nil:
		if m1.txid > m0.txid {
			return []dbMeta{m1, m0}, nil
		}
		return []dbMeta{m0, m1}, nil
	case err0 == nil:
		return []dbMeta{m0}, nil
	case err1 == nil:
		return []dbMeta{m1}, nil
	}
	return nil, fmt.Errorf("both meta pages are damaged (%v; %v)", err0, err1)
}

// precheck checks, before bbolt opens path, what bbolt would trust at
// once: a valid meta page, a file long enough for every page below the
// high-water mark, and, for a writer (bbolt reads the freelist when it
// opens for writing, and only then), a freelist page that is one and
// fits. Its errors wrap [ErrDamaged].
func precheck(path string, write bool) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // bbolt's Open reports it
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return nil
	}
	m, err := readMeta(f)
	if err != nil {
		return fmt.Errorf("%s: %w: %v", path, ErrDamaged, err)
	}
	if need := m.pgid * m.pageSize; m.pgid > uint64(info.Size())/m.pageSize {
		return fmt.Errorf("%s: %w: the file is %d bytes, and its pages reach %d: it was cut short", path, ErrDamaged, info.Size(), need)
	}
	if m.root < 2 || m.root >= m.pgid {
		return fmt.Errorf("%s: %w: the root page %d is out of bounds", path, ErrDamaged, m.root)
	}
	if write && m.freelist != noFreelist {
		if _, err := readFreelist(f, m); err != nil {
			return fmt.Errorf("%s: %w: %v", path, ErrDamaged, err)
		}
	}
	return nil
}

// readPage reads page id and its overflow pages.
func readPage(f *os.File, m dbMeta, id uint64) ([]byte, error) {
	if id < 2 || id >= m.pgid {
		return nil, fmt.Errorf("page %d: out of bounds (the high-water mark is %d)", id, m.pgid)
	}
	hdr := make([]byte, pageHeaderSize)
	if _, err := f.ReadAt(hdr, int64(id*m.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	if got := binary.LittleEndian.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d: it says it is page %d", id, got)
	}
	over := uint64(binary.LittleEndian.Uint32(hdr[12:]))
	if over >= m.pgid-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the high-water mark %d", id, over, m.pgid)
	}
	p := make([]byte, (over+1)*m.pageSize)
	if _, err := f.ReadAt(p, int64(id*m.pageSize)); err != nil {
		return nil, fmt.Errorf("page %d: %v", id, err)
	}
	return p, nil
}

// readFreelist reads and checks the freelist page of m and returns the
// pages it lists, and the freelist's own pages.
func readFreelist(f *os.File, m dbMeta) ([]uint64, error) {
	p, err := readPage(f, m, m.freelist)
	if err != nil {
		return nil, fmt.Errorf("freelist %v", err)
	}
	if flags := binary.LittleEndian.Uint16(p[8:]); flags&flagFreelist == 0 {
		return nil, fmt.Errorf("freelist page %d: not a freelist page (flags %#x)", m.freelist, flags)
	}
	count, at := uint64(binary.LittleEndian.Uint16(p[10:])), uint64(pageHeaderSize)
	if count == 0xFFFF {
		if len(p) < pageHeaderSize+8 {
			return nil, fmt.Errorf("freelist page %d: short", m.freelist)
		}
		count, at = binary.LittleEndian.Uint64(p[pageHeaderSize:]), at+8
	}
	if count > (uint64(len(p))-at)/8 {
		return nil, fmt.Errorf("freelist page %d: %d ids do not fit in it", m.freelist, count)
	}
	ids := make([]uint64, count)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint64(p[at+uint64(i)*8:])
		if ids[i] < 2 || ids[i] >= m.pgid {
			return nil, fmt.Errorf("freelist page %d: free page %d is out of bounds", m.freelist, ids[i])
		}
	}
	over := uint64(binary.LittleEndian.Uint32(p[12:]))
	for i := range over + 1 {
		ids = append(ids, m.freelist+i)
	}
	return ids, nil
}

// checkDBFile reads every page reachable from the meta page of the bbolt
// file at path, through plain reads, and returns what would make bbolt
// fault or panic: pages out of bounds, pages that are not what they say
// or what their parent says, elements that run off their page, a page
// reached twice, a freelist that is not one. It stops after max problems.
func checkDBFile(path string, max int) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return []string{err.Error()}
	}
	m, err := readMeta(f)
	if err != nil {
		return []string{err.Error()}
	}
	if m.pgid > uint64(info.Size())/m.pageSize {
		return []string{fmt.Sprintf("the file is %d bytes, and its pages reach %d: it was cut short", info.Size(), m.pgid*m.pageSize)}
	}
	c := &dbChecker{f: f, m: m, seen: map[uint64]bool{}, max: max}
	if m.freelist != noFreelist {
		c.freePages(m)
	}
	c.page(m.root, nil, 0)
	return c.probs
}

// freePages checks the freelist of m and marks its pages seen: a free
// page reached from the tree is an error.
func (c *dbChecker) freePages(m dbMeta) {
	ids, err := readFreelist(c.f, m)
	if err != nil {
		c.add("%v", err)
	}
	for _, id := range ids {
		c.seen[id] = true
	}
}

// walkDB reads every key and value the tree of meta m holds, through
// plain reads, calling visit with the path of buckets it lies in; pages
// that cannot be read are passed over and named in the problems returned
// (at most max). Nothing it reads is trusted: it is checked as
// checkDBFile checks it.
func walkDB(f *os.File, m dbMeta, max int, visit func(path []string, k, v []byte)) []string {
	c := &dbChecker{f: f, m: m, seen: map[uint64]bool{}, max: max, visit: visit}
	c.page(m.root, nil, 0)
	return c.probs
}

type dbChecker struct {
	f     *os.File
	m     dbMeta
	seen  map[uint64]bool
	probs []string
	max   int
	visit func(path []string, k, v []byte) // walkDB's
}

func (c *dbChecker) add(format string, args ...any) {
	if len(c.probs) < c.max {
		c.probs = append(c.probs, fmt.Sprintf(format, args...))
	}
}

// where names the bucket at path for a problem.
func where(path []string) string {
	if len(path) == 0 {
		return "the root bucket"
	}
	return fmt.Sprintf("bucket %q", strings.Join(path, "/"))
}

// page checks page id, in the bucket at path, and everything below it.
func (c *dbChecker) page(id uint64, path []string, depth int) {
	if len(c.probs) >= c.max && c.visit == nil {
		return
	}
	if depth > 64 {
		c.add("page %d (in %s): the tree is more than 64 levels deep", id, where(path))
		return
	}
	if c.seen[id] {
		c.add("page %d (in %s): reached twice, or both free and in use", id, where(path))
		return
	}
	p, err := readPage(c.f, c.m, id)
	if err != nil {
		c.add("%v (in %s)", err, where(path))
		return
	}
	for i := range uint64(len(p)) / c.m.pageSize {
		c.seen[id+i] = true
	}
	c.elements(p, id, path, depth)
}

// elements checks the branch or leaf page p (page id, or a bucket's
// inline page when id is 0) and what its elements lead to.
func (c *dbChecker) elements(p []byte, id uint64, path []string, depth int) {
	flags := binary.LittleEndian.Uint16(p[8:])
	count := uint64(binary.LittleEndian.Uint16(p[10:]))
	name := fmt.Sprintf("page %d", id)
	if id == 0 {
		name = "an inline page"
	}
	if pageHeaderSize+count*elemSize > uint64(len(p)) {
		c.add("%s (in %s): %d elements do not fit in it", name, where(path), count)
		return
	}
	switch {
	case flags&flagBranch != 0 && id != 0:
		for i := range count {
			e := p[pageHeaderSize+i*elemSize:]
			pos, ksize := uint64(binary.LittleEndian.Uint32(e)), uint64(binary.LittleEndian.Uint32(e[4:]))
			if pageHeaderSize+i*elemSize+pos+ksize > uint64(len(p)) {
				c.add("%s (in %s): element %d runs off the page", name, where(path), i)
				return
			}
			c.page(binary.LittleEndian.Uint64(e[8:]), path, depth+1)
		}
	case flags&flagLeaf != 0:
		for i := range count {
			e := p[pageHeaderSize+i*elemSize:]
			eflags := binary.LittleEndian.Uint32(e)
			pos := uint64(binary.LittleEndian.Uint32(e[4:]))
			ksize := uint64(binary.LittleEndian.Uint32(e[8:]))
			vsize := uint64(binary.LittleEndian.Uint32(e[12:]))
			start := pageHeaderSize + i*elemSize + pos
			if start+ksize+vsize > uint64(len(p)) {
				c.add("%s (in %s): element %d runs off the page", name, where(path), i)
				return
			}
			k, v := p[start:start+ksize], p[start+ksize:start+ksize+vsize]
			if eflags&flagBucket == 0 {
				if c.visit != nil {
					c.visit(path, k, v)
				}
				continue
			}
			sub := append(slices.Clone(path), string(k))
			if len(v) < bucketHdrSize {
				c.add("%s (in %s): %s has a short header", name, where(path), where(sub))
				continue
			}
			if root := binary.LittleEndian.Uint64(v); root != 0 {
				c.page(root, sub, depth+1)
			} else if len(v) < bucketHdrSize+pageHeaderSize {
				c.add("%s (in %s): %s is inline but holds no page", name, where(path), where(sub))
			} else {
				c.elements(v[bucketHdrSize:], 0, sub, depth+1)
			}
		}
	default:
		c.add("%s (in %s): not a branch or leaf page (flags %#x)", name, where(path), flags)
	}
}

// valueAt returns where the value of key in the bucket at path (the
// names of the buckets from the root down) lies in the bbolt file f, as
// the tree of meta m has it: its offset in the file and its length. It
// reads only the pages on the way down, through plain reads, and trusts
// none of them: a page that is not what it should be is an error, and so
// is a key that is not there.
func valueAt(f *os.File, m dbMeta, path [][]byte, key []byte) (int64, int, error) {
	pg := dbPage{id: m.root}
	for range 64 {
		if pg.data == nil {
			var err error
			if pg.data, err = readPage(f, m, pg.id); err != nil {
				return 0, 0, err
			}
			pg.at = int64(pg.id * m.pageSize)
		}
		want := key
		if len(path) > 0 {
			want = path[0]
		}
		flags, err := pg.header()
		if err != nil {
			return 0, 0, err
		}
		if flags&flagBranch != 0 && pg.id != 0 {
			if pg, err = pg.child(want); err != nil {
				return 0, 0, err
			}
			continue
		}
		if flags&flagLeaf == 0 {
			return 0, 0, fmt.Errorf("%s: not a branch or leaf page (flags %#x)", pg, flags)
		}
		off, v, bucket, err := pg.value(want)
		switch {
		case err != nil:
			return 0, 0, err
		case len(path) == 0 && bucket:
			return 0, 0, fmt.Errorf("%q is a bucket", key)
		case len(path) == 0:
			return pg.at + int64(off), len(v), nil
		case !bucket || len(v) < bucketHdrSize:
			return 0, 0, fmt.Errorf("bucket %q: not a bucket", want)
		}
		path = path[1:]
		if root := binary.LittleEndian.Uint64(v); root != 0 {
			pg = dbPage{id: root}
		} else if len(v) < bucketHdrSize+pageHeaderSize {
			return 0, 0, fmt.Errorf("bucket %q: inline but holds no page", want)
		} else {
			pg = dbPage{data: v[bucketHdrSize:], at: pg.at + int64(off) + bucketHdrSize} // id 0: inline
		}
	}
	return 0, 0, errors.New("the tree is more than 64 levels deep")
}

// dbValueAt returns the offset in the bbolt file at dbPath of the value
// of key in the bucket at path, which must hold want: valueAt, checked
// against what bbolt reads there.
func dbValueAt(dbPath string, path [][]byte, key, want []byte) (int64, error) {
	f, err := os.Open(dbPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	m, err := readMeta(f)
	if err != nil {
		return 0, err
	}
	off, n, err := valueAt(f, m, path, key)
	if err != nil {
		return 0, err
	}
	got := make([]byte, n)
	if _, err := f.ReadAt(got, off); err != nil {
		return 0, err
	}
	if !bytes.Equal(got, want) {
		return 0, fmt.Errorf("the database file does not hold at offset %d what bbolt reads", off)
	}
	return off, nil
}

// dbPage is a page of a bbolt file, or an inline bucket's page (id 0),
// and the offset in the file where its data begins.
type dbPage struct {
	id   uint64
	data []byte
	at   int64
}

func (p dbPage) String() string {
	if p.id == 0 {
		return "an inline page"
	}
	return fmt.Sprintf("page %d", p.id)
}

// header returns the page's flags, once its elements are known to fit.
func (p dbPage) header() (uint16, error) {
	count := uint64(binary.LittleEndian.Uint16(p.data[10:]))
	if pageHeaderSize+count*elemSize > uint64(len(p.data)) {
		return 0, fmt.Errorf("%s: %d elements do not fit in it", p, count)
	}
	return binary.LittleEndian.Uint16(p.data[8:]), nil
}

func (p dbPage) count() uint64 { return uint64(binary.LittleEndian.Uint16(p.data[10:])) }

// elem returns element i: its header and its key, whose offset in the
// page it also returns. Branch and leaf elements keep the key's position
// and size at posAt and sizeAt.
func (p dbPage) elem(i uint64, posAt, sizeAt int) (e, key []byte, start uint64, err error) {
	e = p.data[pageHeaderSize+i*elemSize:]
	start = pageHeaderSize + i*elemSize + uint64(binary.LittleEndian.Uint32(e[posAt:]))
	end := start + uint64(binary.LittleEndian.Uint32(e[sizeAt:]))
	if end > uint64(len(p.data)) {
		return nil, nil, 0, fmt.Errorf("%s: element %d runs off the page", p, i)
	}
	return e, p.data[start:end], start, nil
}

// child returns the page of the branch p that holds key: the one whose
// first key is the last one not after it.
func (p dbPage) child(key []byte) (dbPage, error) {
	var id uint64
	for i := range p.count() {
		e, k, _, err := p.elem(i, 0, 4)
		if err != nil {
			return dbPage{}, err
		}
		if i > 0 && bytes.Compare(k, key) > 0 {
			break
		}
		id = binary.LittleEndian.Uint64(e[8:])
	}
	if id == 0 {
		return dbPage{}, fmt.Errorf("%s: a branch with no element", p)
	}
	return dbPage{id: id}, nil
}

// value returns the value of key in the leaf p, its offset in the page,
// and whether it is a bucket.
func (p dbPage) value(key []byte) (int, []byte, bool, error) {
	for i := range p.count() {
		e, k, start, err := p.elem(i, 4, 8)
		if err != nil {
			return 0, nil, false, err
		}
		if !bytes.Equal(k, key) {
			continue
		}
		vstart := start + uint64(len(k))
		vend := vstart + uint64(binary.LittleEndian.Uint32(e[12:]))
		if vend > uint64(len(p.data)) {
			return 0, nil, false, fmt.Errorf("%s: element %d runs off the page", p, i)
		}
		return int(vstart), p.data[vstart:vend], binary.LittleEndian.Uint32(e)&flagBucket != 0, nil
	}
	return 0, nil, false, fmt.Errorf("key %x: not in the file's tree", key)
}
