// Command hg is the command line of hg: a content-addressed store of
// canonical DAG-CBOR blocks and the runtime of evidence-gated work on it.
//
// Run `hg help` for the commands. Results go to stdout, diagnostics to
// stderr as `hg: error: ...` and `hg: hint: ...`; the exit codes are listed
// in exit.go and in docs/cli.md.
package main

import "os"

func main() {
	os.Exit(hgMain())
}
