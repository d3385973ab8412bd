package memstore_test

import (
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/cas/storetest"
	"github.com/ipfs/go-cid"
)

func TestConformance(t *testing.T) {
	storetest.RunWithOptions(t, func(*testing.T) cas.Store { return memstore.New() }, storetest.Options{
		Corrupt: func(t *testing.T, s cas.Store, c cid.Cid, data []byte) {
			if !s.(*memstore.Store).Corrupt(c, data) {
				t.Fatalf("Corrupt(%s): block not stored", c)
			}
		},
	})
}
