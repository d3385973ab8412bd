package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/ipfs/go-cid"
)

// Is this receipt this node's work? Acceptance asks it of every receipt
// an engine returns (its "same work" check, recorded in the acceptance),
// and VerifyRun asks it again of every done node from the stored run
// alone (its "place in the run" check). Each builds what the node's work
// is, a [work], its own way; [sameWork] is the one comparison of a
// verified receipt with it.

// work is what a node's receipt must be for.
type work struct {
	pkg cid.Cid // the package tree
	// run is the run id the receipt must record, "" when any will do (a
	// memo hit's receipt may be another run's).
	run string
	// upstream are the accepted receipts its input packet must record;
	// with anyUpstream, any (a memo hit's may be an earlier run's).
	upstream    []cid.Cid
	anyUpstream bool
	// input is the CID of the input packet the runtime makes of the
	// node's input and upstream receipts ([inputPacket]), which the
	// receipt must link. Undefined, the receipt's payload must have the
	// CID payload, the input's canonical encoding's: a memo hit's packet
	// records other upstream receipts, and a stored run's receipts may
	// be older than this code.
	input, payload cid.Cid
	workspace      cid.Cid // the workspace snapshot: what the read grants let it see
	// why, if not empty, says what of the work could not be rebuilt: no
	// receipt is then the node's work.
	why string
}

// workWords is how a caller of [sameWork] words what does not match: the
// acceptance speaks of what the node asked for and was given, VerifyRun
// of what the work order names and gives. Each format takes what the
// receipt has, then what the work wants.
type workWords struct {
	unreadable, noInput             string // the receipt, its input packet
	pkg, upstream, input, workspace string
}

// acceptWords and placeWords are the words of the acceptance's and of
// VerifyRun's check.
var (
	acceptWords = workWords{
		unreadable: "the receipt cannot be read",
		noInput:    "the receipt's input packet cannot be read",
		pkg:        "receipt ran package %s, the node asked for %s",
		upstream:   "its input records upstream receipts %v, the node was given %v",
		input:      "the receipt's input is not the node's input",
		workspace:  "the receipt's workspace is %s, the node was given %s",
	}
	placeWords = workWords{
		unreadable: "the receipt or its input packet cannot be read",
		noInput:    "the receipt or its input packet cannot be read",
		pkg:        "the receipt ran package %s, the work order names %s",
		upstream:   "its input records upstream receipts %v, the nodes it needs returned %v",
		input:      "the receipt's input is not the one the work order builds from the upstream outputs",
		workspace:  "the receipt's workspace is %s, what the work order gives the node is %s",
	}
)

// sameWork says why the verified receipt v is not the work w, in words,
// or "" if it is: its package, its run, its input packet (the upstream
// receipts it records and its payload) and its workspace snapshot.
func sameWork(v *verify.Verification, w *work, words *workWords) string {
	r, in := v.Object, v.Input
	switch {
	case r == nil:
		return words.unreadable
	case r.Package.Cid != w.pkg:
		return fmt.Sprintf(words.pkg, r.Package.Cid, w.pkg)
	case w.run != "" && r.Run != w.run:
		return fmt.Sprintf("the receipt is of run %q, not %q", r.Run, w.run)
	case in == nil:
		return words.noInput
	case w.why != "":
		return w.why
	}
	if got := linkCIDs(in.Upstream); !w.anyUpstream && !sameCIDs(got, w.upstream) {
		return fmt.Sprintf(words.upstream, got, w.upstream)
	}
	if w.input.Defined() {
		if r.Input.Cid != w.input {
			return words.input
		}
	} else if enc, err := cas.EncodeNode(in.Payload); err != nil || cas.Sum(cas.DagCBOR, enc) != w.payload {
		return words.input
	}
	if r.Workspace == nil || r.Workspace.Cid != w.workspace {
		got := "none"
		if r.Workspace != nil {
			got = r.Workspace.Cid.String()
		}
		return fmt.Sprintf(words.workspace, got, w.workspace)
	}
	return ""
}

// inputPacket returns the CID of the input packet [haygent.Run] makes of
// a node's input and upstream receipts ([ledger.NewInputPacket], stored
// as [ledger.EncodePacket] encodes it: values over the block limit out of
// line).
func inputPacket(ctx context.Context, input map[string]any, upstream []cid.Cid) (cid.Cid, error) {
	sink := newStaging(nil) // only the CIDs of the values' files are wanted
	data, err := ledger.EncodePacket(ledger.NewInputPacket(haygent.InputSchema, input, upstream), func(enc []byte) (cid.Cid, error) {
		c, _, err := cas.PutFile(ctx, sink, bytes.NewReader(enc), nil)
		return c, err
	})
	if err != nil {
		return cid.Undef, err
	}
	return cas.Sum(cas.DagCBOR, data), nil
}

// linkCIDs returns the CIDs of links.
func linkCIDs(links []cas.Link) []cid.Cid {
	out := make([]cid.Cid, len(links))
	for i, l := range links {
		out[i] = l.Cid
	}
	return out
}

func sameCIDs(a, b []cid.Cid) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	cmp := func(x, y cid.Cid) int { return strings.Compare(x.KeyString(), y.KeyString()) }
	slices.SortFunc(a, cmp)
	slices.SortFunc(b, cmp)
	return slices.Equal(a, b)
}
