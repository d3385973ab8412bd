//go:build !linux

package boltstore

import (
	"errors"
	"os"
)

// punchHole is not to be had here.
func punchHole(*os.File, int64, int64) error { return errors.ErrUnsupported }
