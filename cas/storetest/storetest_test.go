package storetest_test

import (
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
)

// TestRun runs the suite, without the corruption tests, on the in-memory
// store, so that a change to the suite is checked here too. The memstore
// package runs it with them.
func TestRun(t *testing.T) {
	storetest.Run(t, func(*testing.T) cas.Store { return memstore.New() })
}
