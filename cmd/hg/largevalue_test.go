package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/ipfs/go-cid"
)

// largeValueSize is the size of the value the tests below move: five
// times the block limit.
const largeValueSize = 20 << 20

// largeString returns n deterministic characters (hex digits), which a
// packet holding them can only carry over the block limit.
func largeString(n int) string {
	var sb strings.Builder
	sb.Grow(n + 64)
	seed := sha256.Sum256([]byte("large value"))
	for sb.Len() < n {
		seed = sha256.Sum256(seed[:])
		sb.WriteString(hex.EncodeToString(seed[:]))
	}
	return sb.String()[:n]
}

// hgRun runs hg with args in dir and returns its stdout; any exit code
// other than want fails the test.
func hgRun(t *testing.T, hg, dir string, want int, args ...string) string {
	t.Helper()
	stdout, _ := hgRun2(t, hg, dir, want, args...)
	return stdout
}

// hgRun2 is hgRun returning stderr too.
func hgRun2(t *testing.T, hg, dir string, want int, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(hg, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HG_STORE=")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("hg %s: %v", strings.Join(args, " "), err)
	}
	if got != want {
		t.Fatalf("hg %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, want, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// blocksWithin fails the test if the store at dir holds a block over
// [cas.MaxBlockSize], which no bundle could carry.
func blocksWithin(t *testing.T, dir string) {
	t.Helper()
	st, err := boltstore.Open(dir, &boltstore.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	biggest := 0
	err = st.AllKeys(context.Background(), func(c cid.Cid, size int) error {
		if size > cas.MaxBlockSize {
			t.Errorf("block %s holds %d bytes, over the block limit of %d", c, size, cas.MaxBlockSize)
		}
		biggest = max(biggest, size)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("largest block of %s: %d bytes", filepath.Base(dir), biggest)
}

// movedStores makes two stores, a and b, and the runner key of a.
func movedStores(t *testing.T, hg string) (work, a, b, pub string) {
	t.Helper()
	work = t.TempDir()
	a, b = filepath.Join(work, "a"), filepath.Join(work, "b")
	hgRun(t, hg, work, 0, "--store", a, "init")
	hgRun(t, hg, work, 0, "--store", b, "init")
	hgRun(t, hg, work, 0, "--store", a, "key", "gen")
	pub = strings.TrimSpace(hgRun(t, hg, work, 0, "--store", a, "key", "show"))
	return work, a, b, pub
}

// moveAndVerify exports root from store a, verifies the bundle alone,
// imports it into store b and verifies it there, then replays it from b.
func moveAndVerify(t *testing.T, hg, work, a, b, pub, root string) {
	t.Helper()
	car := filepath.Join(work, "run.car")
	hgRun(t, hg, work, 0, "--store", a, "bundle", "export", root, "-o", car)
	hgRun(t, hg, work, 0, "verify", "--bundle", car, "--key", pub)
	hgRun(t, hg, work, 0, "--store", b, "bundle", "import", "--pin", "moved", car)
	hgRun(t, hg, work, 0, "--store", b, "key", "trust", pub)
	out := hgRun(t, hg, work, 0, "--store", b, "verify", "moved")
	if !strings.Contains(out, "every check holds") {
		t.Errorf("verify in the second store:\n%s", out)
	}
	hgRun(t, hg, work, 0, "--store", b, "fsck")
	blocksWithin(t, a)
	blocksWithin(t, b)
}

// TestLargeInputMoves runs a Haygent on a 20 MB input, then moves the
// run to another store through a bundle: the bundle verifies alone, is
// imported, verifies in the second store, and replays there with every
// transition agreeing.
func TestLargeInputMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 20 MB several times")
	}
	hg := hgBinary(t)
	work, a, b, pub := movedStores(t, hg)
	value := largeString(largeValueSize)
	input, err := json.Marshal(map[string]any{"value": value})
	if err != nil {
		t.Fatal(err)
	}
	inFile := filepath.Join(work, "input.json")
	if err := os.WriteFile(inFile, input, 0o644); err != nil {
		t.Fatal(err)
	}
	echo, _ := filepath.Abs("../../fixtures/haygents/echo")
	// Exit 0: a PASS.
	hgRun(t, hg, work, 0, "--store", a, "haygent", "run", echo, "--input", inFile, "--pin", "big")
	moveAndVerify(t, hg, work, a, b, pub, "big")
	out := hgRun(t, hg, work, 0, "--store", b, "replay", "moved")
	if !strings.Contains(out, "4/4 transitions agree") {
		t.Errorf("replay in the second store:\n%s", out)
	}
}

// TestLargeWorkOrderInputMoves runs a Work Order whose first node's
// input is a 20 MB literal and whose second node reads it from the
// first node's output, then moves the run as above.
func TestLargeWorkOrderInputMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 20 MB several times")
	}
	hg := hgBinary(t)
	work, a, b, pub := movedStores(t, hg)
	echo, _ := filepath.Abs("../../fixtures/haygents/echo")
	wo := map[string]any{
		"workorder": "large", "objective": "carry a large value through two nodes",
		"nodes": map[string]any{
			"big":  map[string]any{"haygent": echo, "input": map[string]any{"value": largeString(largeValueSize)}},
			"next": map[string]any{"haygent": echo, "needs": []string{"big"}, "input": map[string]any{"value": map[string]any{"from": "big", "pointer": "/value"}}},
		},
	}
	data, err := json.Marshal(wo)
	if err != nil {
		t.Fatal(err)
	}
	woFile := filepath.Join(work, "large.json")
	if err := os.WriteFile(woFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	hgRun(t, hg, work, 0, "--store", a, "run", "--run-id", "run-large", woFile)
	moveAndVerify(t, hg, work, a, b, pub, "run-large")
	out := hgRun(t, hg, work, 0, "--store", b, "replay", "moved")
	if !strings.Contains(out, "run: 8/8 transitions agree") {
		t.Errorf("replay in the second store:\n%s", out)
	}
}

// What cannot be brought within the block limit is refused before
// anything is stored under a name, with an error naming the limit and
// the size, exit 1: an input whose keys alone are over it (every value
// stored apart), and a block given to hg dag put. The store stays whole.
func TestOverLimitRefused(t *testing.T) {
	hg := hgBinary(t)
	work, a, _, _ := movedStores(t, hg)
	keys := map[string]any{"value": "v"}
	for i := range 300000 {
		keys[fmt.Sprintf("key-%07d", i)] = i
	}
	data, err := json.Marshal(keys)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	echo, _ := filepath.Abs("../../fixtures/haygents/echo")
	_, stderr := hgRun2(t, hg, work, 1, "--store", a, "haygent", "run", echo, "--input", write("keys.json", data), "--pin", "keys")
	if !strings.HasPrefix(stderr, "hg: error: input: packet of ") || !strings.Contains(stderr, fmt.Sprintf("the block limit of %d bytes", cas.MaxBlockSize)) {
		t.Errorf("haygent run of 300,000 keys: %s", stderr)
	}
	big, _ := json.Marshal(largeString(6 << 20))
	_, stderr = hgRun2(t, hg, work, 1, "--store", a, "dag", "put", "--pin", "big", write("big.json", big))
	if !strings.HasPrefix(stderr, "hg: error: block of 6291461 bytes: block too large") {
		t.Errorf("dag put of 6 MB: %s", stderr)
	}
	huge, _ := json.Marshal(largeString(20 << 20))
	_, stderr = hgRun2(t, hg, work, 1, "--store", a, "dag", "put", "--pin", "huge", write("huge.json", huge))
	if !strings.HasPrefix(stderr, fmt.Sprintf("hg: error: input of more than %d bytes: block too large", 4*cas.MaxBlockSize)) {
		t.Errorf("dag put of 20 MB: %s", stderr)
	}
	if out := hgRun(t, hg, work, 0, "--store", a, "pin", "ls"); strings.TrimSpace(out) != "" {
		t.Errorf("pins after the refusals: %q", out)
	}
	hgRun(t, hg, work, 0, "--store", a, "fsck")
	blocksWithin(t, a)
}
