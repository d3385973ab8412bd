//go:build unix

package boltstore

import (
	"os"
	"syscall"
)

// diskBytes is what the file takes on disk: its allocated blocks, which
// a sparse file or a punched hole leaves out.
func diskBytes(info os.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return info.Size()
}
