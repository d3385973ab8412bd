//go:build !unix

package boltstore

import (
	"os"
	"time"
)

// lockFile does nothing where flock is not to be had: the store must not
// be in use while it is repaired.
func lockFile(*os.File, time.Duration) error { return nil }
