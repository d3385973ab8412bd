package cas_test

import (
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Verify and CheckHash take a fast path for hg's own CIDs (v1, sha2-256)
// and must agree with go-cid's general one for every other kind.
func TestVerifyAndCheckHashAcrossCIDKinds(t *testing.T) {
	data := []byte("some block")
	sum := func(p cid.Prefix) cid.Cid {
		c, err := p.Sum(data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	poseidon, err := mh.Encode(make([]byte, 32), 0xb401)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		c         cid.Cid
		checkable bool
	}{
		{"hg's own", cas.Sum(cas.DagCBOR, data), true},
		{"raw sha2-256", sum(cid.Prefix{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_256, MhLength: -1}), true},
		{"two-byte codec", sum(cid.Prefix{Version: 1, Codec: cid.DagJSON, MhType: mh.SHA2_256, MhLength: -1}), true},
		{"CIDv0", sum(cid.Prefix{Version: 0, Codec: cid.DagProtobuf, MhType: mh.SHA2_256, MhLength: -1}), true},
		{"sha2-512", sum(cid.Prefix{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_512, MhLength: -1}), true},
		{"truncated sha2-256", sum(cid.Prefix{Version: 1, Codec: cid.Raw, MhType: mh.SHA2_256, MhLength: 20}), true},
		{"unsupported hash", cid.NewCidV1(cid.Raw, poseidon), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := cas.CheckHash(tc.c); (err == nil) != tc.checkable {
				t.Fatalf("CheckHash = %v, want checkable %v", err, tc.checkable)
			}
			if !tc.checkable {
				return
			}
			if err := cas.Verify(tc.c, data); err != nil {
				t.Fatalf("the right bytes: %v", err)
			}
			err := cas.Verify(tc.c, []byte("other bytes"))
			if !errors.Is(err, cas.ErrCorrupt) {
				t.Fatalf("the wrong bytes: %v, want ErrCorrupt", err)
			}
		})
	}
	// A sha2-256 digest of the right length but the wrong bytes.
	d := sha256.Sum256([]byte("other bytes"))
	h, _ := mh.Encode(d[:], mh.SHA2_256)
	if err := cas.Verify(cid.NewCidV1(cas.DagCBOR, h), data); !errors.Is(err, cas.ErrCorrupt) {
		t.Fatalf("a mismatched digest: %v", err)
	}
}

// A CID whose digest is cut to under 20 bytes names no bytes in
// particular: Verify and CheckHash refuse it, whatever the data.
func TestTruncatedDigestsAreRefused(t *testing.T) {
	full := sha256.Sum256([]byte("a forged contract"))
	for _, n := range []int{0, 1, 16, 19} {
		h, err := mh.Encode(full[:n], mh.SHA2_256)
		if err != nil {
			t.Fatal(err)
		}
		c := cid.NewCidV1(cas.Raw, h)
		if err := cas.Verify(c, []byte("a forged contract")); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("Verify(%s, %d-byte digest) = %v, want ErrInvalid", c, n, err)
		}
		if err := cas.CheckHash(c); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("CheckHash(%s) = %v, want ErrInvalid", c, err)
		}
	}
	// The identity hash is the data itself, of any length.
	id, err := mh.Encode([]byte("hi"), mh.IDENTITY)
	if err != nil {
		t.Fatal(err)
	}
	if err := cas.Verify(cid.NewCidV1(cas.Raw, id), []byte("hi")); err != nil {
		t.Errorf("identity CID: %v", err)
	}
}
