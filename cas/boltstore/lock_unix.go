//go:build unix

package boltstore

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// lockFile takes the exclusive flock bbolt's writers take on f, waiting
// up to timeout.
func lockFile(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil || !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
