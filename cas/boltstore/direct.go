package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// Large blocks go to their pack past the page cache where the file system
// allows it (O_DIRECT on Linux): from the process's buffer to the disk,
// without the kernel first finding pages to copy them into. Small blocks
// are still gathered and written through the page cache: direct writes
// must start, end and lie in memory on directAlign boundaries, which
// small blocks would waste most of. What writing large ones through the
// page cache cost: docs/performance.md, "The on-disk store: measured and
// not kept".
const (
	// directAlign is the alignment of the file offset, length and
	// memory of a direct write.
	directAlign = 4096
	// directMin is the smallest block written directly: the padding to
	// directAlign on either side costs it at most 3%.
	directMin = 256 << 10
)

// directFile returns pack n opened for direct writes, or nil when the file
// system or the platform has none (then every write goes through the page
// cache, as before) or the open failed for another reason (out of file
// descriptors: this write goes through the page cache, the next tries
// again). The pack must exist.
func (p *packs) directFile(n uint64) *os.File {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.noDirect || p.readOnly {
		return nil
	}
	if f, ok := p.direct[n]; ok {
		return f
	}
	f, err := openDirectFile(filepath.Join(p.dir, packName(n)))
	if err != nil {
		p.noDirect = refusesDirect(err)
		return nil
	}
	if p.direct == nil {
		p.direct = map[uint64]*os.File{}
	}
	p.direct[n] = f
	return f
}

// refusesDirect reports whether err is a file system's refusal of direct
// writes, rather than a failure of this one.
func refusesDirect(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, errors.ErrUnsupported)
}

// closeDirect closes the direct-write file of pack n, if open: a full
// pack takes no more writes. A failed close loses nothing, since the pack
// is synced through its other descriptor.
func (p *packs) closeDirect(n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.direct[n]; ok {
		f.Close()
		delete(p.direct, n)
	}
}

// disableDirect turns direct writes off for the rest of the store's life,
// after a file system refused one.
func (p *packs) disableDirect() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noDirect = true
}

// openDirectFile is openDirect; tests replace it.
var openDirectFile = openDirect

// alignUp rounds n up to a multiple of directAlign.
func alignUp(n uint64) uint64 { return (n + directAlign - 1) &^ (directAlign - 1) }

// isAligned reports whether b starts on a directAlign boundary and its
// length is a multiple of it, so it can be written directly as it is.
func isAligned(b []byte) bool {
	return len(b) > 0 && len(b)%directAlign == 0 && uintptr(unsafe.Pointer(&b[0]))%directAlign == 0
}

// writeDirect writes data at off (a multiple of directAlign) to f, opened
// for direct writes, padded with zeros to a multiple of directAlign, and
// returns the bytes written. Data that is not aligned in memory is copied
// into *scratch first, grown as needed.
func writeDirect(f *os.File, data []byte, off uint64, scratch *[]byte) (uint64, error) {
	n := alignUp(uint64(len(data)))
	buf := data
	if !isAligned(data) {
		if uint64(cap(*scratch)) < n {
			*scratch = alignedBuf(int(n))
		}
		buf = (*scratch)[:n]
		clear(buf[copy(buf, data):])
	}
	if _, err := f.WriteAt(buf, int64(off)); err != nil {
		return 0, err
	}
	return n, nil
}

// alignedBuf returns n bytes that start on a directAlign boundary.
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % directAlign); r != 0 {
		skip = directAlign - r
	}
	return b[skip : skip+n : skip+n]
}
