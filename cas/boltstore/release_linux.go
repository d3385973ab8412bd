package boltstore

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// releaseMin is the smallest value whose pages View releases. Smaller
// values share their pages with other keys and values, and are cheap to
// keep.
const releaseMin = 64 << 10

var pageSize = uintptr(os.Getpagesize())

// releasePages drops the process's mapping of the pages that lie wholly
// inside v, a value in bbolt's memory map, once it has been read.
//
// bbolt maps the database file read-only and MAP_SHARED, so
// MADV_DONTNEED only unmaps the pages from this process: no data is lost,
// the pages stay in the page cache, and any later read of them (by another
// transaction, say) faults them back in from the file. Without it, every
// block read through View stays mapped and counts in the resident set
// until the database is remapped, so reading a 1 GiB file would grow the
// RSS by 1 GiB. The pages at either end, which v may share with other
// data, are left alone. Errors are ignored: this only saves memory.
func releasePages(v []byte) {
	if len(v) < releaseMin {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
	lo := (start + pageSize - 1) &^ (pageSize - 1)
	hi := (start + uintptr(len(v))) &^ (pageSize - 1)
	if hi <= lo {
		return
	}
	_ = unix.Madvise(v[lo-start:hi-start], unix.MADV_DONTNEED)
}
