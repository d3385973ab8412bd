//go:build !linux

package boltstore

import "os"

// openDirect: direct writes are used on Linux only.
func openDirect(string) (*os.File, error) { return nil, errNoDirect }
