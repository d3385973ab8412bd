package storetest_test

import (
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
)

// TestRun runs the suite, without the corruption tests, on the in-memory
// store, so that a change to the suite is checked here too. The memstore
// package runs it with them.
func TestRun(t *testing.T) {
	storetest.Run(t, func(*testing.T) cas.Store { return memstore.New() })
}

// TestCorruptible runs the suite, with the corruption tests, on a
// Corruptible over the in-memory store: the store the tests of readers
// damage blocks in.
func TestCorruptible(t *testing.T) {
	storetest.RunWithOptions(t, func(*testing.T) cas.Store { return storetest.NewCorruptible(memstore.New()) }, storetest.Options{
		Corrupt: func(t *testing.T, s cas.Store, c cid.Cid, data []byte) {
			if !s.(*storetest.Corruptible).Corrupt(c, data) {
				t.Fatalf("Corrupt(%s): block not stored", c)
			}
		},
	})
}
