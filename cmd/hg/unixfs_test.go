package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/rogpeppe/go-internal/testscript"
)

// unixfsVectors holds the CAR files kubo made (with their provenance and
// licence), kept beside the cas/unixfs tests that read them.
const unixfsVectors = "../../cas/unixfs/testdata"

// unixfscar NAME: copy the kubo-made file NAME into the working directory.
func cmdUnixFSCAR(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 || filepath.Base(args[0]) != args[0] {
		ts.Fatalf("usage: unixfscar NAME")
	}
	data, err := os.ReadFile(filepath.Join(unixfsVectors, args[0]))
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), data, 0o644))
}

// putblocks FILE.car: store every block of the CAR file, each checked
// against its CID, without the closure check of 'hg bundle import': a
// store that holds part of a DAG, as one fetched in part would.
func cmdPutBlocks(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: putblocks FILE.car")
	}
	f, err := os.Open(ts.MkAbs(args[0]))
	ts.Check(err)
	defer f.Close()
	cr, err := cas.NewCARReader(f)
	ts.Check(err)
	st, err := boltstore.Open(storeDir(ts), nil)
	ts.Check(err)
	defer st.Close()
	for {
		s, err := cr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		ts.Check(err)
		b, err := cas.NewBlockWithCID(s.CID, s.Data)
		ts.Check(err)
		ts.Check(st.Put(context.Background(), b))
	}
}

// pincid VAR PIN: set VAR to the CID the pin PIN names, for a script that
// must name a block whose CID it cannot know in advance.
func cmdPinCID(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: pincid VAR PIN")
	}
	st, err := boltstore.Open(storeDir(ts), &boltstore.Options{ReadOnly: true})
	ts.Check(err)
	defer st.Close()
	c, err := st.Pin(context.Background(), args[1])
	ts.Check(err)
	ts.Setenv(args[0], c.String())
}

// hg stat of a dag-pb block that is not UnixFS (here the zero-length
// block, valid dag-pb) describes the block; hg get refuses it, saying why.
func TestStatDagPBNotUnixFS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if code := runHG(t, nil, "--store", dir, "init"); code != 0 {
		t.Fatal("init failed")
	}
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagPB, nil)
	if err := st.Put(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var out bytes.Buffer
	if code := runHGOut(t, &out, nil, "--store", dir, "stat", "--json", b.CID().String()); code != 0 {
		t.Fatalf("stat: exit %d", code)
	}
	if want := `{"cid":"` + b.CID().String() + `","codec":"dag-pb","block_size":0,"size":0,"links":0}`; strings.TrimSpace(out.String()) != want {
		t.Errorf("stat = %s, want %s", out.String(), want)
	}
	if code := runHG(t, nil, "--store", dir, "get", b.CID().String()); code != exitError {
		t.Errorf("get: exit %d, want %d", code, exitError)
	}
}
