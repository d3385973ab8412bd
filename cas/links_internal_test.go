package cas

import (
	"encoding/hex"
	"slices"
	"testing"

	"github.com/ipfs/go-cid"
)

// genericLinks is the full decoder's reading of a block's links, which the
// scanner must agree with.
func genericLinks(data []byte) ([]cid.Cid, error) {
	var v any
	if err := walkMode.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	var out []cid.Cid
	err := collectLinks(v, &out)
	return out, err
}

// FuzzScanLinks checks the head-only link scanner against the full
// decoder: where both read a block, the scanner finds every link the
// decoder finds (and, for a canonical block, exactly those, in the same
// order).
func FuzzScanLinks(f *testing.F) {
	link := "d82a582500" + "01711220" + "0102030405060708091011121314151617181920212223242526272829303132"
	for _, h := range []string{
		"a16161" + link, "82" + link + link, "a2616101616201", "d82b81" + link,
		"a26161" + link + "6161" + link, "8262c328" + link, "f93c00", "f818", "f8", "5f41ff",
		"a1016161", "c24101", "9f01ff", "fb3ff0000000000000", "d82a6161",
	} {
		f.Add(hexBytes(f, h))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := scanLinks(data)
		want, err := genericLinks(data)
		if err != nil || !ok {
			return // Links falls back to the decoder when the scanner gives up
		}
		for _, c := range want {
			if !slices.ContainsFunc(got, c.Equals) {
				t.Fatalf("scanner misses link %s of %x: got %v", c, data, got)
			}
		}
		if _, err := DecodeNode(data); err == nil && !slices.EqualFunc(got, want, func(a, b cid.Cid) bool { return a.Equals(b) }) {
			t.Fatalf("canonical %x: scanner %v, decoder %v", data, got, want)
		}
	})
}

func hexBytes(tb testing.TB, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
