//go:build !linux

package boltstore

// releasePages does nothing: only Linux drops the pages of a value once it
// has been read (see release_linux.go).
func releasePages([]byte) {}
