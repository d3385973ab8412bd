package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/cas/boltstore/boltstoretest"
	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"hg": func() { os.Exit(hgMain()) },
	})
}

// TestScripts runs the user stories in testdata/*.txt against the real
// binary.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			env.Setenv("HG_LOCK_TIMEOUT", "500ms")
			fixtures, err := filepath.Abs("../../fixtures")
			if err != nil {
				return err
			}
			env.Setenv("FIXTURES", fixtures)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"corrupt":    cmdCorrupt,
			"holdstore":  cmdHoldStore,
			"mkfile":     cmdMkfile,
			"sha256":     cmdSHA256,
			"hgexit":     cmdHGExit,
			"readlink":   cmdReadlink,
			"unhex":      cmdUnhex,
			"dagcbor":    cmdDagCBOR,
			"grepstore":  cmdGrepStore,
			"carvector":  cmdCARVector,
			"flipbyte":   cmdFlipByte,
			"dropblock":  cmdDropBlock,
			"tamper":     cmdTamper,
			"forge":      cmdForgeLedger,
			"packcounts": cmdPackCounts,
			"dsseverify": cmdDSSEVerify,
			"unixfscar":  cmdUnixFSCAR,
			"putblocks":  cmdPutBlocks,
			"pincid":     cmdPinCID,
		},
	})
}

// storeDir is the store a script means: $HG_STORE, else $WORK/.haygent.
func storeDir(ts *testscript.TestScript) string {
	if d := ts.Getenv("HG_STORE"); d != "" {
		return ts.MkAbs(d)
	}
	return filepath.Join(ts.Getenv("WORK"), ".haygent")
}

// corrupt CID [OFFSET]: flip one bit of a stored block, bypassing every
// check, as a failing disk would.
func cmdCorrupt(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: corrupt CID [OFFSET]")
	}
	c, err := cas.ParseCID(args[0])
	ts.Check(err)
	off := 0
	if len(args) == 2 {
		off, err = strconv.Atoi(args[1])
		ts.Check(err)
	}
	ts.Check(boltstoretest.Corrupt(storeDir(ts), c, off))
}

var held sync.Map // *testscript.TestScript -> *boltstore.Store

// holdstore: open the store for writing from this (another) process and
// keep it open until the script ends, so hg finds it busy.
func cmdHoldStore(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: holdstore")
	}
	st, err := boltstore.Open(storeDir(ts), &boltstore.Options{Command: "holdstore test"})
	ts.Check(err)
	ts.Defer(func() { st.Close() })
}

// packcounts N BLOCKS BYTES END: overwrite the counts the store keeps for
// pack N, as one wrong number in its database would.
func cmdPackCounts(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: packcounts N BLOCKS BYTES END")
	}
	var v [4]uint64
	for i, a := range args {
		n, err := strconv.ParseUint(a, 10, 64)
		ts.Check(err)
		v[i] = n
	}
	ts.Check(boltstore.SetPackCounts(storeDir(ts), v[0], v[1], v[2], v[3]))
}

// mkfile NAME SIZE: write SIZE deterministic pseudo-random bytes to NAME.
func cmdMkfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mkfile NAME SIZE")
	}
	size, err := strconv.Atoi(args[1])
	ts.Check(err)
	var buf bytes.Buffer
	seed := sha256.Sum256([]byte(args[0]))
	for buf.Len() < size {
		seed = sha256.Sum256(seed[:])
		buf.Write(seed[:])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), buf.Bytes()[:size], 0o644))
}

// sha256 FILE: print the file's sha256 to stdout, for cmp on big files.
func cmdSHA256(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sha256 FILE")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "%x\n", sha256.Sum256(data))
}

// hgexit CODE ARGS...: run hg ARGS and require exit code CODE; its stdout
// and stderr are then checked with stdout and stderr as after exec.
func cmdHGExit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: hgexit CODE ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	path, err := exec.LookPath("hg")
	if p := ts.Getenv("PATH"); p != "" {
		for _, dir := range filepath.SplitList(p) {
			if _, err := os.Stat(filepath.Join(dir, "hg")); err == nil {
				path = filepath.Join(dir, "hg")
				break
			}
		}
	}
	ts.Check(err)
	cmd := exec.Command(path, args[1:]...)
	cmd.Dir = ts.MkAbs(".")
	for _, k := range []string{"PATH", "HOME", "WORK", "TMPDIR", "HG_STORE", "HG_LOCK_TIMEOUT", "FIXTURES"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	cmd.Stdout, cmd.Stderr = ts.Stdout(), ts.Stderr()
	err = cmd.Run()
	got := 0
	if ee, ok := err.(*exec.ExitError); ok {
		got = ee.ExitCode()
	} else {
		ts.Check(err)
	}
	if got != want {
		ts.Fatalf("hg %s: exit code %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// readlink PATH TARGET: PATH must be a symlink to TARGET.
func cmdReadlink(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: readlink PATH TARGET")
	}
	got, err := os.Readlink(ts.MkAbs(args[0]))
	ts.Check(err)
	if (got == args[1]) == neg {
		ts.Fatalf("%s links to %q; want %q (neg=%v)", args[0], got, args[1], neg)
	}
}

// unhex IN OUT: decode the hex digits of IN (spaces and newlines ignored)
// into the bytes of OUT, to write hand-made blocks.
func cmdUnhex(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: unhex IN OUT")
	}
	text, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	data, err := hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), data, 0o644))
}

// dagcbor IN.json OUT: encode DAG-JSON as DAG-CBOR without any of the
// checks hg dag put makes, as a hostile peer would.
func cmdDagCBOR(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: dagcbor IN.json OUT")
	}
	text, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	n, err := cas.DecodeJSON(text)
	ts.Check(err)
	data, err := cas.EncodeNode(n)
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), data, 0o644))
}

// grepstore STRING: no file of the store (database, packs, keys) may hold
// STRING.
func cmdGrepStore(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: grepstore STRING")
	}
	n := 0
	err := filepath.WalkDir(storeDir(ts), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		if bytes.Contains(data, []byte(args[0])) {
			ts.Fatalf("%s holds %q", p, args[0])
		}
		return nil
	})
	ts.Check(err)
	if n == 0 {
		ts.Fatalf("no store files under %s", storeDir(ts))
	}
}

// carVectors holds the CAR files made by other tools (with their
// license), kept beside the cas tests that read them.
const carVectors = "../../cas/testdata/car"

// carvector NAME: copy the CAR test vector NAME into the working
// directory.
func cmdCARVector(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 || filepath.Base(args[0]) != args[0] {
		ts.Fatalf("usage: carvector NAME")
	}
	data, err := os.ReadFile(filepath.Join(carVectors, args[0]))
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), data, 0o644))
}

// dropblock IN OUT N: copy the CAR file IN to OUT without its N-th
// section (from 0), as a bundle stripped of one block would be.
func cmdDropBlock(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: dropblock IN OUT N")
	}
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	in, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer in.Close()
	cr, err := cas.NewCARReader(in)
	ts.Check(err)
	out, err := os.Create(ts.MkAbs(args[1]))
	ts.Check(err)
	defer out.Close()
	cw, err := cas.NewCARWriter(out, cr.Roots())
	ts.Check(err)
	for i := 0; ; i++ {
		sec, err := cr.Next()
		if err == io.EOF {
			break
		}
		ts.Check(err)
		if i == n {
			continue
		}
		b, err := cas.NewBlockWithCID(sec.CID, sec.Data)
		ts.Check(err)
		ts.Check(cw.WriteBlock(b))
	}
	ts.Check(cw.Flush())
}

// flipbyte FILE OFFSET: invert the byte at OFFSET of FILE (counted from
// the end if negative), as a damaged or tampered copy would be.
func cmdFlipByte(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: flipbyte FILE OFFSET")
	}
	path := ts.MkAbs(args[0])
	data, err := os.ReadFile(path)
	ts.Check(err)
	off, err := strconv.Atoi(args[1])
	ts.Check(err)
	if off < 0 {
		off += len(data)
	}
	if off < 0 || off >= len(data) {
		ts.Fatalf("offset %s outside the %d bytes of %s", args[1], len(data), args[0])
	}
	data[off] ^= 0xff
	ts.Check(os.WriteFile(path, data, 0o644))
}

// TestDagPutVectors stores every IPLD codec fixture's DAG-JSON with
// `hg dag put` and checks the CID and bytes against the fixture's
// DAG-CBOR, then `hg dag get` prints the fixture's DAG-JSON back.
func TestDagPutVectors(t *testing.T) {
	dirs, err := filepath.Glob("../../cas/testdata/ipld-codec/*")
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "store")
	if code := runHG(t, nil, "--store", store, "init"); code != 0 {
		t.Fatalf("init: exit %d", code)
	}
	n := 0
	for _, dir := range dirs {
		cbors, _ := filepath.Glob(filepath.Join(dir, "*.dag-cbor"))
		jsons, _ := filepath.Glob(filepath.Join(dir, "*.dag-json"))
		if len(cbors) != 1 || len(jsons) != 1 {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			want := strings.TrimSuffix(filepath.Base(cbors[0]), ".dag-cbor")
			var out bytes.Buffer
			if code := runHGOut(t, &out, nil, "--store", store, "dag", "put", jsons[0]); code != 0 {
				t.Fatalf("dag put: exit %d", code)
			}
			if got := strings.TrimSpace(out.String()); got != want {
				t.Fatalf("dag put gave %s, want %s", got, want)
			}
			out.Reset()
			if code := runHGOut(t, &out, nil, "--store", store, "block", "get", want); code != 0 {
				t.Fatalf("block get: exit %d", code)
			}
			wantBytes, _ := os.ReadFile(cbors[0])
			if !bytes.Equal(out.Bytes(), wantBytes) {
				t.Fatalf("stored bytes differ from the fixture")
			}
			out.Reset()
			if code := runHGOut(t, &out, nil, "--store", store, "dag", "get", want); code != 0 {
				t.Fatalf("dag get: exit %d", code)
			}
			wantJSON, _ := os.ReadFile(jsons[0])
			if got := bytes.TrimSuffix(out.Bytes(), []byte("\n")); !bytes.Equal(got, wantJSON) {
				t.Fatalf("dag get printed %s, want %s", got, wantJSON)
			}
		})
	}
	if n < 40 {
		t.Fatalf("only %d fixtures found", n)
	}
}

func runHG(t *testing.T, stdin []byte, args ...string) int {
	return runHGOut(t, &bytes.Buffer{}, stdin, args...)
}

func runHGOut(t *testing.T, stdout *bytes.Buffer, stdin []byte, args ...string) int {
	t.Helper()
	var stderr bytes.Buffer
	code := run(context.Background(), args, bytes.NewReader(stdin), stdout, &stderr)
	if code != 0 {
		t.Logf("hg %s: %s", strings.Join(args, " "), stderr.String())
	}
	return code
}
