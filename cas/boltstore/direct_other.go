//go:build !linux

package boltstore

import (
	"errors"
	"os"
)

// openDirect: direct writes are used on Linux only.
func openDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }
