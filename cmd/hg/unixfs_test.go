package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

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
