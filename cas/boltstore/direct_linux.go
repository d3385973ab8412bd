package boltstore

import (
	"os"
	"syscall"
)

// openDirect opens path for writes that bypass the page cache. File
// systems without them (tmpfs) refuse the flag.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0)
}
