package cas

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

// Multicodec codes of the blocks hg writes.
const (
	// Raw is the multicodec of file chunks: bytes with no structure.
	Raw = cid.Raw // 0x55
	// DagCBOR is the multicodec of every structured hg object.
	DagCBOR = cid.DagCBOR // 0x71
	// DagPB is the multicodec of UnixFS nodes made by IPFS; hg only walks
	// their links.
	DagPB = cid.DagProtobuf // 0x70
)

// Sum returns the CIDv1 with a sha2-256 multihash of data under codec.
// It is the only way hg names the blocks it writes.
func Sum(codec uint64, data []byte) cid.Cid {
	d := sha256.Sum256(data)
	return sumToCID(codec, d)
}

func sumToCID(codec uint64, d [sha256.Size]byte) cid.Cid {
	buf := make([]byte, 0, 2+sha256.Size)
	buf = append(buf, mh.SHA2_256, sha256.Size)
	buf = append(buf, d[:]...)
	return cid.NewCidV1(codec, mh.Multihash(buf))
}

// ParseCID parses the text form of a CID (any multibase, v0 or v1).
// Errors wrap [ErrBadCID].
func ParseCID(s string) (cid.Cid, error) {
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("%q: %w", s, ErrBadCID)
	}
	return c, nil
}

// CastCID parses the binary form of a CID, which must fill b exactly.
// Errors wrap [ErrBadCID].
func CastCID(b []byte) (cid.Cid, error) {
	c, err := cid.Cast(b)
	if err != nil {
		return cid.Undef, fmt.Errorf("%x: %w", b, ErrBadCID)
	}
	return c, nil
}

// Verify checks that data hashes to c with c's own hash function, so blocks
// made by other tools (other codecs, CIDv0) are checked too.
func Verify(c cid.Cid, data []byte) error {
	if isSHA256v1(c) {
		d := sha256.Sum256(data)
		if c.KeyString()[4:] != string(d[:]) {
			return &CorruptError{CID: c, Got: sumToCID(c.Type(), d)}
		}
		return nil
	}
	if err := fullDigest(c); err != nil {
		return fmt.Errorf("verify %s: %w", c, err)
	}
	got, err := c.Prefix().Sum(data)
	if err != nil {
		return fmt.Errorf("verify %s: %w", c, err)
	}
	if !got.Equals(c) {
		return &CorruptError{CID: c, Got: got}
	}
	return nil
}

// isSHA256v1 reports whether c is a CIDv1 with a one-byte codec (as hg's
// are) whose multihash is a full sha2-256. It reads the binary form in
// place: version, codec, hash code, digest length, digest.
func isSHA256v1(c cid.Cid) bool {
	s := c.KeyString()
	return len(s) == 4+sha256.Size && s[0] == 1 && s[1] < 0x80 && s[2] == mh.SHA2_256 && s[3] == sha256.Size
}

// Canonical returns the CID hg names the block c by: CIDv1 with c's codec
// and a sha2-256 multihash (what [Sum] makes). That is c itself when c is
// one; else the block is read from st (and hashed against c) and summed.
// The same bytes stored under two hash functions have two CIDs and one
// canonical CID: what is known of a block by its CID (that a recheck took
// a receipt back) is looked up by this one.
func Canonical(ctx context.Context, st BlockReader, c cid.Cid) (cid.Cid, error) {
	if isSHA256v1(c) {
		return c, nil
	}
	var out cid.Cid
	err := st.View(ctx, c, func(data []byte) error {
		out = Sum(c.Type(), data)
		return nil
	})
	return out, err
}

// CheckHash returns an error if c's hash function cannot be computed, so
// that its blocks cannot be verified.
func CheckHash(c cid.Cid) error {
	if isSHA256v1(c) {
		return nil
	}
	if err := fullDigest(c); err != nil {
		return err
	}
	_, err := c.Prefix().Sum(nil)
	return err
}

// minDigest is the shortest digest a CID may keep of its hash's output,
// and the shortest output a hash function may have: multihashes may be
// truncated, but one cut to a few bytes (or a function of a few bytes'
// output, as blake2b-8) would let other bytes pass for the block. 20
// bytes keep 160 bits, as kubo requires.
const minDigest = 20

// fullDigest refuses a CID whose hash function is not a cryptographic one
// hg accepts ([hashAllowed]), or whose multihash keeps less than
// [minDigest] bytes of its digest. The identity hash holds the bytes
// themselves, whatever their length.
func fullDigest(c cid.Cid) error {
	p := c.Prefix()
	if p.MhType == mh.IDENTITY {
		return nil
	}
	if !hashAllowed(p.MhType) {
		name := mh.Codes[p.MhType]
		if name == "" {
			name = fmt.Sprintf("0x%x", p.MhType)
		}
		return fmt.Errorf("%w: hash function %s is not one hg accepts (sha2-256, sha2-512, sha3, keccak, blake2b/blake2s of 160 bits or more, blake3): a weak or short hash would let other bytes pass for the block", ErrInvalid, name)
	}
	if p.MhLength < minDigest {
		return fmt.Errorf("%w: the %s digest keeps %d bytes, fewer than the %d a CID must", ErrInvalid, mh.Codes[p.MhType], p.MhLength, minDigest)
	}
	return nil
}

// hashAllowed reports whether code is a cryptographic hash function of at
// least [minDigest] bytes of output: never md5, sha1, murmur3 or a
// blake2 of a short output, whose digests can be matched by other bytes.
func hashAllowed(code uint64) bool {
	switch code {
	case mh.SHA2_256, mh.SHA2_512, mh.DBL_SHA2_256,
		mh.SHA3_224, mh.SHA3_256, mh.SHA3_384, mh.SHA3_512,
		mh.KECCAK_224, mh.KECCAK_256, mh.KECCAK_384, mh.KECCAK_512,
		mh.SHAKE_256, mh.BLAKE3:
		return true
	}
	// blake2b-N and blake2s-N: code BLAKE2x_MIN+N/8-1.
	switch {
	case code >= mh.BLAKE2B_MIN+minDigest-1 && code <= mh.BLAKE2B_MAX:
		return true
	case code >= mh.BLAKE2S_MIN+minDigest-1 && code <= mh.BLAKE2S_MAX:
		return true
	}
	return false
}
