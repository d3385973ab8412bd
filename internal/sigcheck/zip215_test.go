package sigcheck

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"filippo.io/edwards25519"
)

// zip215Cases reads testdata/zip215.txt: ZIP 215's 196 signatures of
// "Zcash", every one valid under ZIP 215 (see the file for where they come
// from).
func zip215Cases(t *testing.T) []signed {
	t.Helper()
	f, err := os.Open("testdata/zip215.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []signed
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		pubHex, sigHex, _ := strings.Cut(sc.Text(), " ")
		pub, err1 := hex.DecodeString(pubHex)
		sig, err2 := hex.DecodeString(sigHex)
		if err1 != nil || err2 != nil || len(pub) != 32 || len(sig) != 64 {
			t.Fatalf("bad line %q", sc.Text())
		}
		cases = append(cases, signed{pub, []byte("Zcash"), sig})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 196 {
		t.Fatalf("%d cases, want 196", len(cases))
	}
	return cases
}

// ZIP 215 accepts all 196; this rule accepts those whose R is canonical
// and refuses the 84 whose R is not (6 encodings of R, each with the 14
// keys of the vectors), one at a time and in batches.
func TestZIP215(t *testing.T) {
	nonCanonicalR := map[string]bool{}
	for _, r := range []string{
		"0100000000000000000000000000000000000000000000000000000000000080", // y = 1, sign bit set
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // y = p - 1, sign bit set
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // y = p, sign bit set
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // y = p + 1
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", // y = p + 1, sign bit set
	} {
		nonCanonicalR[r] = true
	}
	var valid, refused []signed
	for i, c := range zip215Cases(t) {
		r := c.sig[:32]
		// The list above is the encodings that do not come back from
		// decoding and encoding again.
		p, err := new(edwards25519.Point).SetBytes(r)
		if err != nil {
			t.Fatalf("case %d: R %x is not a point: %v", i, r, err)
		}
		if nonCanonicalR[hex.EncodeToString(r)] == bytes.Equal(p.Bytes(), r) {
			t.Fatalf("case %d: R %x is listed wrongly", i, r)
		}
		want := !nonCanonicalR[hex.EncodeToString(r)]
		if want {
			valid = append(valid, c)
		} else {
			refused = append(refused, c)
		}
		if Verify(c.pub, c.msg, c.sig) != want {
			t.Errorf("case %d (key %x, signature %x): Verify %v, want %v", i, c.pub, c.sig, !want, want)
		}
		if batchOf([]signed{c}).Verify() != want {
			t.Errorf("case %d (key %x, signature %x): a batch of it alone: %v, want %v", i, c.pub, c.sig, !want, want)
		}
	}
	if len(valid) != 112 || len(refused) != 84 {
		t.Fatalf("%d valid and %d refused, want 112 and 84", len(valid), len(refused))
	}
	if !batchOf(valid).Verify() {
		t.Error("a batch of the 112 valid cases is refused")
	}
	for i, c := range refused {
		if batchOf(append(valid[:len(valid):len(valid)], c)).Verify() {
			t.Errorf("refused case %d (key %x, signature %x): a batch of it and the valid ones holds", i, c.pub, c.sig)
		}
	}
}
