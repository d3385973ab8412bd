package boltstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// punchHole gives the blocks of length bytes at off of f back to the file
// system, leaving the file's size and every other byte as they are (the
// range reads as zeros).
func punchHole(f *os.File, off, length int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
}
