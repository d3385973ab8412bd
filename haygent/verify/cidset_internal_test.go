package verify

import (
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// A cidSet answers the same as a map on either side of its switch from
// a list to a map.
func TestCIDSet(t *testing.T) {
	var s cidSet
	want := map[cid.Cid]bool{}
	for i := range 3 * cidSetList {
		c := cas.Sum(cas.Raw, []byte{byte(i), byte(i >> 8)})
		if s.has(c) {
			t.Fatalf("%d: has %s before it was added", i, c)
		}
		s.add(c)
		want[c] = true
		if i%3 == 0 {
			s.add(c) // again: no second entry
		}
		if n := len(s.list) + len(s.m); n != len(want) {
			t.Fatalf("%d: %d entries, want %d", i, n, len(want))
		}
		for w := range want {
			if !s.has(w) || !s.hasKey([]byte(w.KeyString())) {
				t.Fatalf("%d: lost %s", i, w)
			}
		}
		if other := cas.Sum(cas.DagCBOR, []byte{byte(i)}); s.has(other) || s.hasKey([]byte(other.KeyString())) {
			t.Fatalf("%d: has %s, never added", i, other)
		}
	}
}
