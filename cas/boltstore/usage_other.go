//go:build !unix

package boltstore

import "os"

// diskBytes is what the file takes on disk; here, its size.
func diskBytes(info os.FileInfo) int64 { return info.Size() }
