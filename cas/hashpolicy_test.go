package cas_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// A CID names its bytes only if no other bytes can be found that hash to
// it: blocks under a weak or short hash function (md5, sha1, murmur3, a
// blake2 of 8 or 128 bits, a digest cut to 16 bytes) are refused on every
// read and by a bundle import, so one CID cannot stand for two contents.
// The cryptographic hashes of 160 bits or more are read as before.
func TestWeakHashesRefused(t *testing.T) {
	data := []byte("echo safe-installer-ok\n")
	sum := func(code uint64, length int) cid.Cid {
		t.Helper()
		h, err := mh.Sum(data, code, length)
		if err != nil {
			t.Fatal(err)
		}
		return cid.NewCidV1(cas.Raw, h)
	}
	weak := map[string]cid.Cid{
		"md5": sum(mh.MD5, -1), "sha1": sum(mh.SHA1, -1), "murmur3-x64-64": sum(mh.MURMUR3X64_64, -1),
		"blake2b-8": sum(mh.BLAKE2B_MIN, -1), "blake2b-128": sum(mh.BLAKE2B_MIN+15, -1), "sha2-256 cut to 16": sum(mh.SHA2_256, 16),
	}
	for name, c := range weak {
		if err := cas.Verify(c, data); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("%s: Verify = %v, want refused as invalid", name, err)
		}
		car := carBytes(header(t, map[string]any{"roots": []any{c}, "version": int64(1)}), section(c, data))
		st := memstore.New()
		if _, err := cas.ImportCAR(context.Background(), st, bytes.NewReader(car), nil); !errors.Is(err, cas.ErrInvalid) {
			t.Errorf("%s: ImportCAR = %v, want refused as invalid", name, err)
		}
		if countBlocks(t, st) != 0 {
			t.Errorf("%s: blocks left behind", name)
		}
	}
	strong := map[string]cid.Cid{
		"sha2-256": sum(mh.SHA2_256, -1), "sha2-512": sum(mh.SHA2_512, -1), "sha3-256": sum(mh.SHA3_256, -1),
		"keccak-256": sum(mh.KECCAK_256, -1), "blake2b-256": sum(mh.BLAKE2B_MAX-32, -1), "blake2s-256": sum(mh.BLAKE2S_MAX, -1),
		"blake3": sum(mh.BLAKE3, 32), "sha2-256 cut to 20": sum(mh.SHA2_256, 20),
	}
	for name, c := range strong {
		if err := cas.Verify(c, data); err != nil {
			t.Errorf("%s: Verify = %v", name, err)
		}
		if err := cas.Verify(c, append([]byte{}, "other bytes"...)); !errors.As(err, new(*cas.CorruptError)) {
			t.Errorf("%s: other bytes: %v, want corrupt", name, err)
		}
	}
}
