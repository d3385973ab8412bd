//go:build !linux

package haygent

import "io/fs"

// changeStamp is a file's modification time here.
func changeStamp(fi fs.FileInfo) string { return fi.ModTime().String() }
