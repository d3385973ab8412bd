package verify

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// Names of the checks [VerifyReceipt] makes, in the order they appear in a
// [Verification]. Gate checks are named "gate ID" for the final gate
// evaluation and "gate ID (seq N)" for an earlier one.
const (
	CheckBlocks       = "block hashes"
	CheckCanonical    = "canonical form"
	CheckChain        = "transition chain"
	CheckIndex        = "receipt index"
	CheckSignature    = "signature"
	CheckTrust        = "trusted signer"
	CheckPackageGates = "package gates"
	CheckGatePrefix   = "gate "
	CheckApprovals    = "approvals"
	CheckStatus       = "status"
)

// Check is one line of a verification table.
type Check struct {
	Name   string // one of the Check* names, or "gate ID"
	OK     bool
	Detail string // for a failure: what is broken, naming the block CID or transition seq
}

// Verification is the result of verifying one receipt: one [Check] per line,
// every check made even after an earlier one failed, so the table is
// complete.
type Verification struct {
	Receipt     cid.Cid
	Run         string // the receipt's run, if it could be read
	Status      string // the receipt's status, if it could be read
	Checks      []Check
	Transitions int // transitions read from the chain
	Blocks      int // distinct blocks the receipt reaches, bad ones included

	// What the verifier decoded strictly, for callers that go on to use
	// it (nil where it could not be read): the receipt and the packets it
	// links as input and output.
	Object        *ledger.Receipt
	Input, Output *ledger.Packet
}

// OK reports whether there is at least one check and every check passed.
func (v *Verification) OK() bool {
	return v != nil && len(v.Checks) > 0 && v.FirstFailure() == nil
}

// FirstFailure returns the first failed check, or nil if none failed.
func (v *Verification) FirstFailure() *Check {
	if v == nil {
		return nil
	}
	for i := range v.Checks {
		if !v.Checks[i].OK {
			return &v.Checks[i]
		}
	}
	return nil
}

// maxGatesFile bounds the gates/gates.json VerifyReceipt reads.
const maxGatesFile = cas.MaxBlockSize

// VerifyReceipt verifies the receipt c independently of the runtime that
// made it, reading only from st, and returns one [Check] per line of the
// table below. A failed check is never an error: err is returned only for a
// store that fails to answer (I/O) or for ctx's error. Every check is made
// even when an earlier one failed; a check that depends on something that
// cannot be read fails saying so, it never passes by default.
//
//   - "block hashes": every block the receipt reaches through its links
//     (the transition chain, packets, evidence, gate results, slot calls and
//     their raw responses, the permission snapshot, the package and workspace
//     trees, artifacts: the whole closure) is present and hashes to its CID,
//     raw chunks included, and every DAG-CBOR block's links can be read.
//     The walk goes on past a bad block (not into it), so every missing or
//     corrupt block is named, with the block that links to it. It does not
//     enter the upstream receipts the input packet records (a Work Order
//     node's inputs): each of those is a receipt verified on its own, and
//     a node's staging store need not hold them.
//
//   - "canonical form": the receipt, every transition, evidence object, gate
//     result and slot call, every packet they link (transition input and
//     output, receipt input and output, slot call projection and proposal)
//     decode strictly with [cas.Unmarshal] into their types (which re-encodes
//     and compares bytes) and carry their own "type"; the permission
//     snapshots decode with [cas.DecodeNode] as hg/permissions@1. Trees and
//     files are checked for canonical form only where they are read (the
//     package tree, below, and the root of the final workspace, which a
//     Work Order hands on).
//
//   - "transition chain": from receipt.Head along Prior to a transition
//     without one, seq runs exactly receipt.Transitions-1 down to 0, with no
//     gap, repeat or reordering, and the count equals receipt.Transitions;
//     every transition's Run is the receipt's Run; every evidence object a
//     transition links carries that Run and the transition's Step and
//     Attempt (anything else is a splice); only transitions of kind "gates"
//     hold gate results, and those hold no evidence.
//
//   - "receipt index": the receipt's lists agree with its chain: Steps is
//     the (step, kind, attempt, status) of each transition in order;
//     Evidence, SlotCalls and Denied are the concatenation of the
//     transitions' lists in chain order; Gates, when not empty, is the gate
//     list of the last gates transition; every transition names the
//     receipt's Package and Permissions; Repairs is the head's Attempt; every
//     halt.last_evidence link is evidence of the run. The final workspace,
//     when the receipt records one, is the workspace the head transition
//     observed if the head is an evaluation of the gates that observed
//     it, and the workspace the run started from if no transition
//     records a mutation or an observation of the workspace.
//
//   - "signature": [Receipt.VerifySignature] over the receipt's own Signer.
//
//   - "trusted signer": the Signer is one of trusted. With no trusted keys
//     this check fails ("no trusted keys given").
//
//   - "package gates": gates/gates.json is read from the receipt's Package
//     tree in st (every tree node decoded strictly, the file verified) and
//     parsed with [gate.Parse].
//
//   - "gate ID": for every transition of kind "gates" (the last one is the
//     final evaluation; earlier ones are named "gate ID (seq N)"), each gate
//     is evaluated again by this code with [gate.Compile] and
//     [gate.Gate.Evaluate] over what the runtime's evaluateGates saw: all
//     evidence recorded by the transitions up to that one, in chain order
//     (Ref the evidence CID, ObservedAt parsed from observed_at, Data as
//     stored), with Env.Now the time the gate results record ("at", which is
//     the instant the runtime evaluated at; it is not the transition's
//     started_at) and Env.LastChange mapping each mutation evidence's subject
//     to its observed_at (a later mutation of the same subject, in chain
//     order, replaces an earlier one, as in the runtime). The recomputed
//     verdict, action and evidence read, and the package's predicate, must
//     equal the recorded hg/gate@1 (the reason text is not compared: it is
//     for people). A gate that no longer compiles, a recorded gate the
//     package does not define, a gate recorded twice, and a package gate
//     with no recorded result all fail; so does every gate of an evaluation
//     whose evidence or time cannot be read. If the chain cannot be read in
//     full, one failed check "gate evaluation" stands for all of them. A
//     chain with no gates transition (a run that halted before the gates
//     ran) has no gate lines.
//
//     Caveat: the runtime sets a mutation's LastChange from a clock reading
//     taken just before the one it records as observed_at, and does not
//     record the first. With a clock that advances between readings (or a
//     fixed one) the verdicts agree; with a coarse clock that gives an
//     earlier observation of the same subject the same instant as that
//     first reading, the runtime can say PASS where this code says STALE,
//     and the gate check fails.
//
//   - "approvals": every approval evidence of the chain is checked again
//     with the runtime's rule (checkApproval): the approval's signature by
//     its approver, the approver among the package manifest's approvers,
//     the subject the step saw, and issued_at <= observed_at < expires_at,
//     observed_at being the instant of use. The recorded "valid" must
//     agree: a runner that counted an expired, forged or foreign approval
//     fails here, whatever the gates said.
//
//   - "status": the status is PASS or HALT. PASS requires no halt record,
//     an output packet whose schema is the output contract, a final gate
//     evaluation that is the head of the chain, and every gate of the
//     package recorded and recomputed PASS in it. HALT requires a halt
//     record and no output; a halt that names a failed gate must match that
//     gate's recomputed, non-PASS verdict in the final evaluation. A HALT
//     whose gates all pass is valid: a run may halt for other reasons (a
//     denial, a broken output contract, a time limit), and a HALT never
//     claims success.
//
// Not checked (future work): the output against the output contract and the
// input against the input contract; Used, Limitations, Artifacts (against
// the mutation evidence) and the workspace snapshot (against the read
// grants); the repair budget, name, version and objective against the
// manifest; that the transitions follow the package's spine (a trusted
// signer could drop an evidence-free step and renumber the chain); slot
// calls' raw responses against their verdicts and proposals; the upstream
// receipts (see [VerifyReceiptChain]); the time stamps beyond those gates
// and approvals read, and the replay command.
//
// It remembers nothing for later calls; [VerifyReceiptKnown] and
// [ChainVerifier] take a [Cache].
func VerifyReceipt(ctx context.Context, st cas.Store, receipt cid.Cid, trusted []ed25519.PublicKey) (*Verification, error) {
	return VerifyReceiptKnown(ctx, st, receipt, trusted, nil, nil)
}

// VerifyReceiptKnown is [VerifyReceipt] for a caller that has already
// verified some closures in st (a scheduler verifies the package tree it
// stored once, then many receipts that link it): the block walk does not
// enter the CIDs in known. Every other check is the same; the package's
// gates.json is still read and parsed. cache, when not nil, is the
// caller's [Cache], shared with its other verifications and the runtime
// whose receipts they check; nil is a new one for this call alone.
func VerifyReceiptKnown(ctx context.Context, st cas.Store, receipt cid.Cid, trusted []ed25519.PublicKey, known map[cid.Cid]bool, cache *Cache) (*Verification, error) {
	return verifyReceipt(ctx, st, receipt, trusted, known, cache, nil)
}

// verifyReceipt is [VerifyReceiptKnown] sharing the untyped objects it
// decodes with the other receipts of a [ChainVerifier], when nodes is not
// nil: every receipt of a run links the same permission snapshot.
func verifyReceipt(ctx context.Context, st cas.Store, receipt cid.Cid, trusted []ed25519.PublicKey, known map[cid.Cid]bool, cache *Cache, nodes *sync.Map) (*Verification, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cache == nil {
		cache = NewCache()
	}
	vr := &verifier{
		ctx: ctx, st: st, v: &Verification{Receipt: receipt}, known: known, cache: cache, sharedNodes: nodes,
		bad: map[cid.Cid]string{}, decoded: map[cid.Cid]any{}, undecodable: map[cid.Cid]bool{}, misread: map[cid.Cid]bool{},
	}
	// Some forty links per receipt, a dozen distinct: a map from the
	// start (a list would be searched end to end for each).
	vr.cids.m = make(map[string]cid.Cid, 32)
	vr.dec.Links = vr.cids.get
	if err := vr.verify(receipt, trusted); err != nil {
		return nil, err
	}
	return vr.v, nil
}

// verifier is one verification in progress.
type verifier struct {
	ctx context.Context
	st  cas.Store
	v   *Verification

	bad         map[cid.Cid]string // blocks missing, corrupt or with unreadable links: why
	badOrder    []cid.Cid
	decoded     map[cid.Cid]any // typed objects already decoded
	undecodable map[cid.Cid]bool
	checked     map[cid.Cid]bool      // typed objects checked, not decoded (see checkObject)
	dec         cas.Decoder           // decodes links to CIDs in cids to those
	cids        cidSet                // the CIDs decoded, each once
	linksOf     map[cid.Cid][]cid.Cid // the links of the blocks decoded
	misread     map[cid.Cid]bool      // typed objects also linked as an untyped node, already noted
	receiptData []byte                // the receipt's block, once it has decoded
	canon       problems
	known       map[cid.Cid]bool // closures verified by the caller
	cache       *Cache
	// sharedNodes, when not nil, holds untyped objects other receipts'
	// verifications decoded strictly, by CID: the same bytes decode the
	// same way, and a block that cannot be read is never added.
	sharedNodes *sync.Map
}

// problems collects the failures of one check.
type problems struct{ list []string }

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

// maxListed bounds the problems one Detail lists.
const maxListed = 6

func (p *problems) check(name, okDetail string) Check {
	if len(p.list) == 0 {
		return Check{Name: name, OK: true, Detail: okDetail}
	}
	list := p.list
	more := ""
	if len(list) > maxListed {
		more = fmt.Sprintf("; and %d more", len(list)-maxListed)
		list = list[:maxListed]
	}
	return Check{Name: name, Detail: strings.Join(list, "; ") + more}
}

func (vr *verifier) add(c Check) { vr.v.Checks = append(vr.v.Checks, c) }

func fail(name, format string, args ...any) Check {
	return Check{Name: name, Detail: fmt.Sprintf(format, args...)}
}

// blockProblem says whether err is about the data (a missing, corrupt,
// non-canonical or invalid block) rather than the store, and why.
func blockProblem(err error) (string, bool) {
	var nf *cas.NotFoundError
	var ce *cas.CorruptError
	switch {
	case errors.As(err, &nf):
		return "missing", true
	case errors.As(err, &ce):
		if ce.Got.Defined() {
			return "corrupt: its bytes hash to " + ce.Got.String(), true
		}
		return "corrupt", true
	case errors.Is(err, cas.ErrNotFound):
		return "missing", true
	case errors.Is(err, cas.ErrCorrupt):
		return "corrupt", true
	case errors.Is(err, cas.ErrNotCanonical), errors.Is(err, cas.ErrInvalid),
		errors.Is(err, cas.ErrBadCID), errors.Is(err, cas.ErrTooLarge):
		return err.Error(), true
	}
	return "", false
}

// walk visits the closure of root like [cas.Walk], verifying every block
// (raw ones included), but records a bad block and goes on instead of
// stopping, so that every bad block is named.
func (vr *verifier) walk(root cid.Cid, skip map[cid.Cid]bool) error {
	// Each entry carries the block that linked it, for the messages. A
	// CID goes on the stack once, when it is first met; the links of
	// the blocks read next leave out what has been met, unparsed.
	type entry struct{ c, parent cid.Cid }
	var met cidSet
	met.add(root)
	known := func(raw []byte) bool { return met.hasKey(raw) }
	stack := make([]entry, 1, 32)
	stack[0] = entry{c: root}
	blocks := 0
	for len(stack) > 0 {
		if err := vr.ctx.Err(); err != nil {
			return err
		}
		e := stack[len(stack)-1]
		c := e.c
		stack = stack[:len(stack)-1]
		if (skip[c] || vr.known[c]) && c != root {
			continue
		}
		blocks++
		markBad := func(why string) {
			if e.parent.Defined() {
				why += " (linked from " + e.parent.String() + ")"
			}
			vr.markBad(c, why)
		}
		if err := cas.CheckHash(c); err != nil {
			markBad("its hash function cannot be checked: " + err.Error())
			continue
		}
		if why, ok := vr.bad[c]; ok {
			markBad(why) // found by the decoding; now with its parent
			continue
		}
		links, decoded := vr.linksOf[c]
		var linkErr error
		var err error
		if !decoded {
			err = vr.st.View(vr.ctx, c, func(data []byte) error {
				links, linkErr = cas.NewLinks(c, data, known)
				return nil
			})
		}
		if err != nil {
			if cerr := vr.ctx.Err(); cerr != nil {
				return cerr
			}
			why, ok := blockProblem(err)
			if !ok {
				return fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
			}
			markBad(why)
			continue
		}
		if linkErr != nil {
			markBad("its links cannot be read: " + linkErr.Error())
			continue
		}
		for i := len(links) - 1; i >= 0; i-- {
			if !met.has(links[i]) { // a block may link the same CID twice
				met.add(links[i])
				stack = append(stack, entry{links[i], c})
			}
		}
	}
	vr.v.Blocks = blocks
	return nil
}

func (vr *verifier) markBad(c cid.Cid, why string) {
	if _, ok := vr.bad[c]; !ok {
		vr.badOrder = append(vr.badOrder, c)
	}
	vr.bad[c] = why
}

// upstreamOf returns the upstream receipts the receipt's input packet
// records, as far as they can be read; the walk reports what cannot. The
// objects it decodes are kept for the checks that follow.
func (vr *verifier) upstreamOf(rc cid.Cid) (map[cid.Cid]bool, error) {
	var r ledger.Receipt
	var in ledger.Packet
	if ok, err := vr.object(rc, "receipt", ledger.TypeReceipt, &r); !ok || err != nil {
		return nil, err
	}
	if ok, err := vr.object(r.Input.Cid, "input packet", ledger.TypePacket, &in); !ok || err != nil {
		return nil, err
	}
	out := map[cid.Cid]bool{}
	for _, u := range in.Upstream {
		out[u.Cid] = true
	}
	return out, nil
}

// object reads and strictly decodes the typed object c into v (a pointer)
// and checks its type. It returns false, with the reason noted under
// "canonical form", when it cannot; err is only for the store or ctx.
func (vr *verifier) object(c cid.Cid, what, typ string, v any) (bool, error) {
	if prev, ok := vr.decoded[c]; ok {
		// Copy the cached value into v when the types agree.
		if copyInto(prev, v) {
			return true, nil
		}
	}
	if vr.undecodable[c] {
		return false, nil
	}
	ok, err := vr.decode(c, what, typ, v, false)
	if err != nil {
		return false, err
	}
	if !ok {
		vr.undecodable[c] = true
		return false, nil
	}
	vr.decoded[c] = v
	delete(vr.checked, c)
	return true, nil
}

// keepLinks records the links of c, a block that has decoded, for the
// walk, and the CIDs among them for the decoding of the blocks after it.
func (vr *verifier) keepLinks(c cid.Cid, links []cid.Cid) {
	if vr.linksOf == nil {
		vr.linksOf = make(map[cid.Cid][]cid.Cid, 16)
	}
	vr.linksOf[c] = links
	for _, l := range links {
		vr.cids.add(l)
	}
}

// checkObject is object for a typed object whose validity and type
// matter but not its content (the packets between steps): the block is
// checked as [cas.Unmarshal] would accept it, without building the value.
// v is only the type to check against.
func (vr *verifier) checkObject(c cid.Cid, what, typ string, v any) error {
	if prev, ok := vr.decoded[c]; (ok && ledger.TypeOf(prev) == typ) || vr.undecodable[c] || vr.checked[c] {
		return nil
	}
	ok, err := vr.decode(c, what, typ, v, true)
	if err != nil {
		return err
	}
	if !ok {
		vr.undecodable[c] = true
		return nil
	}
	if vr.checked == nil {
		vr.checked = map[cid.Cid]bool{}
	}
	vr.checked[c] = true
	return nil
}

// decode reads c into v, or only checks that it would, and its type.
func (vr *verifier) decode(c cid.Cid, what, typ string, v any, checkOnly bool) (bool, error) {
	if why, ok := vr.bad[c]; ok {
		vr.canon.add("%s %s cannot be read: %s", what, c, why)
		return false, nil
	}
	if c.Type() != cas.DagCBOR {
		vr.canon.add("%s %s is not DAG-CBOR (codec 0x%x)", what, c, c.Type())
		return false, nil
	}
	var decodeErr error
	var got string
	err := vr.st.View(vr.ctx, c, func(data []byte) error {
		var links []cid.Cid
		if checkOnly {
			links, decodeErr = vr.dec.CheckLinks(data, v)
			got, _ = cas.TextEntry(data, "type")
		} else {
			links, decodeErr = vr.dec.UnmarshalLinks(data, v)
			got = ledger.TypeOf(v)
		}
		if decodeErr == nil {
			vr.keepLinks(c, links)
		}
		if checkOnly {
			return nil
		}
		if decodeErr == nil && c == vr.v.Receipt && !vr.cache.sigs.ReceiptSigned(c) {
			// Kept for the signature check, which cuts its signing
			// bytes from the block instead of encoding them again.
			vr.receiptData = bytes.Clone(data)
		}
		return nil
	})
	if err != nil {
		if cerr := vr.ctx.Err(); cerr != nil {
			return false, cerr
		}
		why, ok := blockProblem(err)
		if !ok {
			return false, fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
		}
		vr.markBad(c, why)
		vr.canon.add("%s %s cannot be read: %s", what, c, why)
		return false, nil
	}
	if decodeErr != nil {
		vr.canon.add("%s %s: %v", what, c, decodeErr)
		return false, nil
	}
	if got != typ {
		vr.canon.add("%s %s is a %q, not %s", what, c, got, typ)
		return false, nil
	}
	return true, nil
}

// copyInto copies the object src points at into dst, when both point at
// the same type.
func copyInto(src, dst any) bool {
	d, v := reflect.ValueOf(dst), reflect.ValueOf(src)
	if d.Kind() != reflect.Pointer || v.Type() != d.Type() || d.IsNil() || v.IsNil() {
		return false
	}
	d.Elem().Set(v.Elem())
	return true
}

// node reads and strictly decodes an untyped object whose "type" must be
// typ (the permission snapshot).
func (vr *verifier) node(c cid.Cid, what, typ string) error {
	if prev, ok := vr.decoded[c]; ok {
		// The same block may be linked many times (one snapshot for the
		// receipt and every transition), but it is a snapshot only if
		// it was read as one: a typed object, such as the input packet,
		// is not.
		if m, isNode := prev.(map[string]any); !isNode || m["type"] != typ {
			if !vr.misread[c] {
				vr.canon.add("%s %s is not an %s object", what, c, typ)
				vr.misread[c] = true
			}
		}
		return nil
	}
	if vr.undecodable[c] {
		return nil
	}
	if why, ok := vr.bad[c]; ok {
		vr.canon.add("%s %s cannot be read: %s", what, c, why)
		vr.undecodable[c] = true
		return nil
	}
	if vr.sharedNodes != nil {
		if n, ok := vr.sharedNodes.Load(c); ok {
			if m, ok := n.(map[string]any); ok && m["type"] == typ {
				vr.decoded[c] = n
				return nil
			}
		}
	}
	var n any
	var decodeErr error
	err := vr.st.View(vr.ctx, c, func(data []byte) error {
		n, decodeErr = cas.DecodeNode(data)
		return nil
	})
	if err != nil {
		if cerr := vr.ctx.Err(); cerr != nil {
			return cerr
		}
		why, ok := blockProblem(err)
		if !ok {
			return fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
		}
		vr.markBad(c, why)
		decodeErr = errors.New("cannot be read: " + why)
	}
	if decodeErr == nil {
		if m, ok := n.(map[string]any); !ok || m["type"] != typ {
			decodeErr = fmt.Errorf("is not an %s object", typ)
		}
	}
	if decodeErr != nil {
		vr.canon.add("%s %s: %v", what, c, decodeErr)
		vr.undecodable[c] = true
		return nil
	}
	vr.decoded[c] = n
	if vr.sharedNodes != nil {
		vr.sharedNodes.Store(c, n)
	}
	return nil
}

// evaluation is what one gates transition's verdicts are recomputed from.
type evaluation struct {
	node       *ledger.ChainNode
	evidence   []gate.Evidence
	lastChange map[string]time.Time
	stale      map[string]string // evidence ref -> why its workspace changed
	unusable   []string          // why the recomputation cannot be trusted
	final      bool
}

func (vr *verifier) verify(rc cid.Cid, trusted []ed25519.PublicKey) error {
	v := vr.v
	upstream, err := vr.upstreamOf(rc)
	if err != nil {
		return err
	}
	// The typed objects are decoded first: the walk of the closure that
	// follows takes their links from the decoding, and reads again only
	// the blocks nothing decoded.
	var r ledger.Receipt
	ok, err := vr.object(rc, "receipt", ledger.TypeReceipt, &r)
	if err != nil {
		return err
	}
	var chain []*ledger.ChainNode
	var chainProbs problems
	var complete bool
	if ok {
		// Read the chain, head first, and everything each transition
		// links.
		chain, chainProbs, complete, err = vr.readChain(&r)
		if err != nil {
			return err
		}
		if err := vr.readReceiptLinks(&r); err != nil {
			return err
		}
	}
	if err := vr.walk(rc, upstream); err != nil {
		return err
	}
	blocks := problems{}
	for _, c := range vr.badOrder {
		blocks.add("block %s is %s", c, vr.bad[c])
	}
	blockCheck := func() Check {
		ok := fmt.Sprintf("%d blocks present and hashing to their CIDs", v.Blocks)
		if len(upstream) > 0 {
			ok += fmt.Sprintf(" (%d upstream receipts not walked: each is verified on its own)", len(upstream))
		}
		return blocks.check(CheckBlocks, ok)
	}
	if !ok {
		vr.add(blockCheck())
		vr.add(vr.canon.check(CheckCanonical, ""))
		for _, name := range []string{CheckChain, CheckIndex, CheckSignature, CheckTrust, CheckPackageGates, CheckStatus} {
			vr.add(fail(name, "not checked: receipt %s cannot be read", rc))
		}
		return nil
	}
	v.Run, v.Status = r.Run, r.Status
	v.Transitions = len(chain)

	// Values the packets hold out of line (largevalue.go) are read back
	// before the packets are handed out and the canonical form judged.
	if err := vr.readOutlined(&r); err != nil {
		return err
	}
	v.Object = &r
	v.Input, _ = vr.decoded[r.Input.Cid].(*ledger.Packet)
	if r.Output != nil {
		v.Output, _ = vr.decoded[r.Output.Cid].(*ledger.Packet)
	}

	vr.add(blockCheck())
	objects := len(vr.decoded) + len(vr.undecodable) + len(vr.checked)
	vr.add(vr.canon.check(CheckCanonical, fmt.Sprintf("%d objects decode strictly and re-encode to their bytes", objects)))

	vr.checkChain(&r, chain, chainProbs, complete)
	vr.checkIndex(&r, chain, complete)
	vr.checkSignature(&r, trusted)

	specs, compiled, pkgCheck, err := vr.packageGates(&r)
	if err != nil {
		return err
	}
	vr.add(pkgCheck)
	final, err := vr.checkGates(chain, complete, specs, compiled, pkgCheck.OK)
	if err != nil {
		return err
	}
	if err := vr.checkApprovals(&r, chain); err != nil {
		return err
	}
	vr.checkStatus(&r, chain, complete, specs, pkgCheck.OK, final)
	return nil
}

// checkApprovals checks every approval the chain records again, with the
// runtime's own rule, at the instant the runtime used it: the signature,
// the approver among the package's, the subject, and the window from
// issue to expiry. What the runtime recorded must agree.
func (vr *verifier) checkApprovals(r *ledger.Receipt, chain []*ledger.ChainNode) error {
	var probs problems
	used := 0
	var approvers []string
	approversRead := false
	for _, n := range chain {
		for i, ev := range n.Evidence {
			if ev == nil || ev.Kind != evidence.KindApproval {
				continue
			}
			used++
			if !approversRead {
				approversRead = true
				var why string
				var err error
				if approvers, why, err = vr.packageApprovers(r.Package.Cid); err != nil {
					return err
				} else if why != "" {
					probs.add("the package's approvers cannot be read: %s", why)
				}
			}
			where := fmt.Sprintf("seq %d (step %s) evidence %s", n.T.Seq, n.T.Step, n.T.Evidence[i].Cid)
			a, observed, valid, ok := ledger.ApprovalFromEvidence(ev.Data)
			at, err := time.Parse(time.RFC3339Nano, ev.ObservedAt)
			if !ok || err != nil {
				probs.add("%s: approval evidence without a valid flag or time of use", where)
				continue
			}
			problem := ledger.CheckApproval(a, observed, at, approvers)
			switch {
			case valid && problem != nil:
				probs.add("%s: recorded as a valid approval, but %v", where, problem)
			case !valid && problem == nil:
				probs.add("%s: recorded as invalid, but the approval checks out", where)
			}
		}
	}
	vr.add(probs.check(CheckApprovals, fmt.Sprintf("%d approval(s) checked again (signature, approver, subject, window at the time of use): the record agrees", used)))
	return nil
}

// packageApprovers reads the approvers of the package's manifest.
func (vr *verifier) packageApprovers(pkg cid.Cid) ([]string, string, error) {
	data, why, err := vr.readPackageFile(pkg, "", haygent.ManifestFile)
	if err != nil || why != "" {
		return nil, why, err
	}
	var m struct {
		Approvers []string `json:"approvers"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, haygent.ManifestFile + ": " + err.Error(), nil
	}
	return m.Approvers, "", nil
}

// readChain reads the receipt's chain ([ledger.ReadChain]) and checks
// the packets and permission snapshot each transition links, which the
// checks that follow do not read.
func (vr *verifier) readChain(r *ledger.Receipt) ([]*ledger.ChainNode, problems, bool, error) {
	chain, list, complete, err := ledger.ReadChain(r, vr.object, func(n *ledger.ChainNode) error {
		for _, sc := range n.SlotCalls {
			if sc == nil {
				continue
			}
			if err := vr.packet(sc.Projection.Cid, "projection packet"); err != nil {
				return err
			}
			if sc.Proposal != nil {
				if err := vr.packet(sc.Proposal.Cid, "proposal packet"); err != nil {
					return err
				}
			}
		}
		for _, p := range []cas.Link{n.T.Input, n.T.Output} {
			if err := vr.packet(p.Cid, "packet"); err != nil {
				return err
			}
		}
		return vr.node(n.T.Permissions.Cid, "permission snapshot", "hg/permissions@1")
	})
	return chain, problems{list}, complete, err
}

// packet checks the packet c, which the checks that follow do not read.
func (vr *verifier) packet(c cid.Cid, what string) error {
	return vr.checkObject(c, what, ledger.TypePacket, (*ledger.Packet)(nil))
}

// readReceiptLinks decodes the objects the receipt links directly.
func (vr *verifier) readReceiptLinks(r *ledger.Receipt) error {
	// The input and output packets are decoded: the verification
	// returns them.
	var in, out ledger.Packet
	if _, err := vr.object(r.Input.Cid, "input packet", ledger.TypePacket, &in); err != nil {
		return err
	}
	if r.Output != nil {
		if _, err := vr.object(r.Output.Cid, "output packet", ledger.TypePacket, &out); err != nil {
			return err
		}
	}
	if err := vr.node(r.Permissions.Cid, "permission snapshot", "hg/permissions@1"); err != nil {
		return err
	}
	if err := vr.finalTree(r); err != nil {
		return err
	}
	for _, l := range r.Evidence {
		var ev ledger.Evidence
		if _, err := vr.object(l.Cid, "evidence", ledger.TypeEvidence, &ev); err != nil {
			return err
		}
	}
	for _, l := range r.Gates {
		var g ledger.GateResult
		if _, err := vr.object(l.Cid, "gate result", ledger.TypeGate, &g); err != nil {
			return err
		}
	}
	for _, l := range r.SlotCalls {
		var sc ledger.SlotCall
		if _, err := vr.object(l.Cid, "slot call", ledger.TypeSlotCall, &sc); err != nil {
			return err
		}
	}
	return nil
}

// finalTree checks that the root of the receipt's final workspace, which
// a Work Order hands on, decodes strictly as an hg/tree@1. The empty
// tree, the final workspace of every run given none, is known by its
// CID.
func (vr *verifier) finalTree(r *ledger.Receipt) error {
	if r.FinalWorkspace == nil || r.FinalWorkspace.Cid == haygent.EmptyTree() {
		return nil
	}
	c := r.FinalWorkspace.Cid
	if why, ok := vr.bad[c]; ok {
		vr.canon.add("final workspace %s cannot be read: %s", c, why)
		return nil
	}
	_, err := cas.LoadTree(vr.ctx, vr.st, c)
	if err == nil {
		return nil
	}
	if cerr := vr.ctx.Err(); cerr != nil {
		return cerr
	}
	why, ok := blockProblem(err)
	switch {
	case !ok:
		return fmt.Errorf("verify %s: read %s: %w", vr.v.Receipt, c, err)
	case errors.Is(err, cas.ErrNotFound) || errors.Is(err, cas.ErrCorrupt):
		vr.markBad(c, why)
		vr.canon.add("final workspace %s cannot be read: %s", c, why)
	default:
		vr.canon.add("final workspace %s is not an hg/tree@1: %v", c, err)
	}
	return nil
}

func (vr *verifier) checkChain(r *ledger.Receipt, chain []*ledger.ChainNode, probs problems, complete bool) {
	for i, n := range chain {
		t := n.T
		if complete {
			switch {
			case i == 0 && t.Seq != 0:
				probs.add("the first transition %s has seq %d, want 0", n.CID, t.Seq)
			case i > 0:
				prev := chain[i-1].T.Seq
				switch {
				case t.Seq == prev:
					probs.add("seq %d is repeated (transition %s)", t.Seq, n.CID)
				case t.Seq < prev:
					probs.add("seq %d (transition %s) follows seq %d: out of order", t.Seq, n.CID, prev)
				case t.Seq > prev+1:
					probs.add("seq %d (transition %s) follows seq %d: a gap", t.Seq, n.CID, prev)
				}
			}
		}
		if t.Run != r.Run {
			probs.add("transition seq %d (%s) belongs to run %q, not %q", t.Seq, n.CID, t.Run, r.Run)
		}
		for j, ev := range n.Evidence {
			l := t.Evidence[j].Cid
			switch {
			case ev == nil:
				probs.add("evidence %s of transition seq %d cannot be read, so its run, step and attempt cannot be checked", l, t.Seq)
			case ev.Run != r.Run:
				probs.add("evidence %s in transition seq %d belongs to run %q, not %q", l, t.Seq, ev.Run, r.Run)
			case ev.Step != t.Step || ev.Attempt != t.Attempt:
				probs.add("evidence %s in transition seq %d was observed by step %q attempt %d, not step %q attempt %d", l, t.Seq, ev.Step, ev.Attempt, t.Step, t.Attempt)
			}
		}
		if t.Kind == "gates" && !ledger.OnlyWorkspace(n.Evidence) {
			probs.add("gates transition seq %d (%s) records evidence other than one observation of the workspace; gates only read it", t.Seq, n.CID)
		}
		if t.Kind != "gates" && len(t.Gates) > 0 {
			probs.add("transition seq %d (%s) of kind %q records gate results; only gates transitions do", t.Seq, n.CID, t.Kind)
		}
	}
	if complete {
		if int64(len(chain)) != r.Transitions {
			probs.add("the chain holds %d transitions, the receipt counts %d", len(chain), r.Transitions)
		}
		if len(chain) > 0 {
			if head := chain[len(chain)-1].T; head.Seq != r.Transitions-1 {
				probs.add("the head transition %s has seq %d, want %d (the receipt counts %d transitions)", r.Head.Cid, head.Seq, r.Transitions-1, r.Transitions)
			}
		}
	}
	vr.add(probs.check(CheckChain, fmt.Sprintf("%d transitions, seq %d down to 0, all of run %q", len(chain), len(chain)-1, r.Run)))
}

// diffList describes the first difference between the receipt's list and
// the chain's, or "" if they are equal.
func diffList[T comparable](what string, receipt, chain []T, format func(T) string) string {
	for i := 0; i < min(len(receipt), len(chain)); i++ {
		if receipt[i] != chain[i] {
			return fmt.Sprintf("%s[%d] is %s, the chain has %s", what, i, format(receipt[i]), format(chain[i]))
		}
	}
	if len(receipt) != len(chain) {
		return fmt.Sprintf("the receipt lists %d %s, the chain records %d", len(receipt), what, len(chain))
	}
	return ""
}

func linkString(l cas.Link) string { return l.String() }

func linkStrings(l []cas.Link) []string {
	out := make([]string, len(l))
	for i, c := range l {
		out[i] = c.String()
	}
	return out
}

// stepString and deniedString describe a step and a denial as the index
// lists them.
func stepString(s ledger.StepRun) string {
	return fmt.Sprintf("%s/%s attempt %d %s", s.Step, s.Kind, s.Attempt, s.Status)
}

func deniedString(d ledger.Denied) string {
	return d.Verb + ":" + d.Kind + ":" + d.Target + " by " + d.Rule
}

func (vr *verifier) checkIndex(r *ledger.Receipt, chain []*ledger.ChainNode, complete bool) {
	if !complete {
		vr.add(fail(CheckIndex, "not checked: the transition chain cannot be read in full"))
		return
	}
	var probs problems
	var steps []ledger.StepRun
	var evidence, slotCalls, gates []cas.Link
	var denied []ledger.Denied
	var otherPkg, otherPerm []string
	for _, n := range chain {
		t := n.T
		steps = append(steps, ledger.StepRun{Step: t.Step, Kind: t.Kind, Attempt: t.Attempt, Status: t.Status})
		evidence = append(evidence, t.Evidence...)
		slotCalls = append(slotCalls, t.SlotCalls...)
		denied = append(denied, t.Denied...)
		if t.Kind == "gates" {
			gates = t.Gates
		}
		if t.Package.Cid != r.Package.Cid {
			otherPkg = append(otherPkg, fmt.Sprintf("seq %d ran package %s", t.Seq, t.Package.Cid))
		}
		if t.Permissions.Cid != r.Permissions.Cid {
			otherPerm = append(otherPerm, fmt.Sprintf("seq %d ran under permissions %s", t.Seq, t.Permissions.Cid))
		}
	}
	if len(otherPkg) > 0 {
		probs.add("the receipt names package %s, but transition %s", r.Package.Cid, summarizeList(otherPkg))
	}
	if len(otherPerm) > 0 {
		probs.add("the receipt names permissions %s, but transition %s", r.Permissions.Cid, summarizeList(otherPerm))
	}
	for _, d := range []string{
		diffList("steps", r.Steps, steps, stepString),
		diffList("evidence", r.Evidence, evidence, linkString),
		diffList("slot calls", r.SlotCalls, slotCalls, linkString),
		diffList("denials", r.Denied, denied, deniedString),
	} {
		if d != "" {
			probs.add("%s", d)
		}
	}
	if len(r.Gates) > 0 {
		if d := diffList("gates", r.Gates, gates, linkString); d != "" {
			probs.add("%s (the last gates transition)", d)
		}
	}
	if len(chain) > 0 {
		if head := chain[len(chain)-1].T; r.Repairs != head.Attempt {
			probs.add("the receipt counts %d repairs, the head transition is attempt %d", r.Repairs, head.Attempt)
		}
	}
	if r.Halt != nil {
		for _, l := range r.Halt.LastEvidence {
			if !slices.Contains(evidence, l) {
				probs.add("halt.last_evidence %s is not evidence of this run's chain", l.Cid)
			}
		}
	}
	if why := finalWorkspaceProblem(r, chain); why != "" {
		probs.add("%s", why)
	}
	vr.add(probs.check(CheckIndex, fmt.Sprintf("steps, %d evidence, %d slot calls, %d denials and the final gates agree with the chain", len(evidence), len(slotCalls), len(denied))))
}

// finalWorkspaceProblem says how the receipt's final workspace disagrees
// with its chain, or "" if it does not. The runtime stores the final
// workspace as it stores every snapshot: when the head of the chain is an
// evaluation of the gates that observed the workspace, nothing has
// changed it since, so it is that observation; when no step applied a
// change (no mutation evidence) and no evaluation observed the
// workspace, it is the workspace the run started from. A receipt without
// one (made before it was recorded) has nothing to check.
func finalWorkspaceProblem(r *ledger.Receipt, chain []*ledger.ChainNode) string {
	if r.FinalWorkspace == nil || len(chain) == 0 {
		return ""
	}
	head := chain[len(chain)-1]
	if head.T.Kind == "gates" {
		for _, ev := range head.Evidence {
			if ev != nil && ev.Kind == ledger.KindWorkspace && ev.Workspace != nil {
				if ev.Workspace.Cid != r.FinalWorkspace.Cid {
					return fmt.Sprintf("the final workspace is %s, but the head transition (seq %d, the last evaluation of the gates) observed %s", r.FinalWorkspace.Cid, head.T.Seq, ev.Workspace.Cid)
				}
				return ""
			}
		}
	}
	for _, n := range chain {
		for _, ev := range n.Evidence {
			if ev == nil || ev.Kind == evidence.KindMutation || ev.Kind == ledger.KindWorkspace {
				return "" // a change was applied, or observed: checked above or not at all
			}
		}
	}
	if r.Workspace == nil || r.Workspace.Cid != r.FinalWorkspace.Cid {
		start := "none"
		if r.Workspace != nil {
			start = r.Workspace.Cid.String()
		}
		return fmt.Sprintf("the final workspace is %s, but no step applied a change to the workspace the run started from (%s)", r.FinalWorkspace.Cid, start)
	}
	return ""
}

// summarizeList joins the first items of list, saying how many more.
func summarizeList(list []string) string {
	if len(list) <= 2 {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s, %s and %d more", list[0], list[1], len(list)-2)
}

func (vr *verifier) checkSignature(r *ledger.Receipt, trusted []ed25519.PublicKey) {
	signer := "(none)"
	if len(r.Signer) == ed25519.PublicKeySize {
		signer = ledger.FormatPublicKey(ed25519.PublicKey(r.Signer))
	}
	// The receipt decoded strictly and re-encodes to its block, so the
	// signing bytes are cut from the block rather than encoded again;
	// none are needed when a batch has verified this very block's.
	var err error
	if !vr.cache.sigs.ReceiptSigned(vr.v.Receipt) {
		err = r.VerifyEncodedSignature(vr.receiptData, vr.cache.sigs)
	}
	if err != nil {
		vr.add(fail(CheckSignature, "signature by %s: %v", signer, err))
	} else {
		vr.add(Check{Name: CheckSignature, OK: true, Detail: "signed by " + signer})
	}
	switch {
	case len(trusted) == 0:
		vr.add(fail(CheckTrust, "no trusted keys given (signer %s)", signer))
	case len(r.Signer) != ed25519.PublicKeySize:
		vr.add(fail(CheckTrust, "the receipt names no signer"))
	case slices.ContainsFunc(trusted, func(k ed25519.PublicKey) bool { return bytes.Equal(k, r.Signer) }):
		vr.add(Check{Name: CheckTrust, OK: true, Detail: signer + " is trusted"})
	default:
		vr.add(fail(CheckTrust, "signer %s is not among the %d trusted keys", signer, len(trusted)))
	}
}

// packageGates reads gates/gates.json from the receipt's package tree and
// compiles each gate; compiled[i].err says why specs[i] does not compile.
func (vr *verifier) packageGates(r *ledger.Receipt) ([]gate.Spec, []compiledGate, Check, error) {
	// A package is immutable: its gates, once read and compiled, are
	// the same for every receipt that names it.
	if hit, ok := vr.cache.packageGates(r.Package.Cid); ok {
		return hit.specs, hit.compiled, hit.check, nil
	}
	specs, compiled, check, err := vr.readPackageGates(r)
	if err == nil && check.OK {
		vr.cache.addPackageGates(r.Package.Cid, packageGateSet{specs, compiled, check})
	}
	return specs, compiled, check, err
}

func (vr *verifier) readPackageGates(r *ledger.Receipt) ([]gate.Spec, []compiledGate, Check, error) {
	data, why, err := vr.readPackageFile(r.Package.Cid, "gates", "gates.json")
	if err != nil {
		return nil, nil, Check{}, err
	}
	if why != "" {
		return nil, nil, fail(CheckPackageGates, "package %s: %s", r.Package.Cid, why), nil
	}
	specs, err := gate.Parse(data)
	if err != nil {
		return nil, nil, fail(CheckPackageGates, "package %s: %v", r.Package.Cid, err), nil
	}
	var probs problems
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.ID] {
			probs.add("package %s defines gate %q twice", r.Package.Cid, s.ID)
		}
		seen[s.ID] = true
	}
	compiled := vr.cache.compileGates(data, specs)
	return specs, compiled, probs.check(CheckPackageGates, fmt.Sprintf("%d gates in %s of package %s", len(specs), haygent.GatesFile, r.Package.Cid)), nil
}

type compiledGate struct {
	g   *gate.Gate
	err error
}

// readPackageFile reads dir/name from the package tree pkg. why is set
// when the file cannot be read for a reason in the data.
func (vr *verifier) readPackageFile(pkg cid.Cid, dir, name string) (data []byte, why string, err error) {
	dataErr := func(err error) ([]byte, string, error) {
		if cerr := vr.ctx.Err(); cerr != nil {
			return nil, "", cerr
		}
		if _, ok := blockProblem(err); ok {
			return nil, err.Error(), nil
		}
		return nil, "", err
	}
	root, err := cas.LoadTree(vr.ctx, vr.st, pkg)
	if err != nil {
		return dataErr(err)
	}
	sub, path := root, name
	if dir != "" {
		path = dir + "/" + name
		i := slices.IndexFunc(root.Entries, func(e cas.TreeEntry) bool { return e.Name == dir })
		if i < 0 || root.Entries[i].Kind != cas.KindDir {
			return nil, "no " + dir + " directory", nil
		}
		if sub, err = cas.LoadTree(vr.ctx, vr.st, root.Entries[i].Link.Cid); err != nil {
			return dataErr(err)
		}
	}
	j := slices.IndexFunc(sub.Entries, func(e cas.TreeEntry) bool { return e.Name == name })
	if j < 0 || sub.Entries[j].Kind != cas.KindFile {
		return nil, "no file " + path, nil
	}
	if sub.Entries[j].Size > maxGatesFile {
		return nil, fmt.Sprintf("%s is %d bytes, more than %d", path, sub.Entries[j].Size, maxGatesFile), nil
	}
	var buf limitedBuffer
	buf.limit = maxGatesFile
	if _, err := cas.ReadFile(vr.ctx, vr.st, sub.Entries[j].Link.Cid, &buf, nil); err != nil {
		if errors.Is(err, errTooBig) {
			return nil, fmt.Sprintf("%s holds more than %d bytes", path, maxGatesFile), nil
		}
		return dataErr(err)
	}
	return buf.Bytes(), "", nil
}

var errTooBig = errors.New("file too big")

type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, errTooBig
	}
	return b.Buffer.Write(p)
}

// finalVerdicts is what the final gate evaluation recorded and recomputed.
type finalVerdicts struct {
	exists   bool              // the chain holds a gates transition
	node     *ledger.ChainNode // the last gates transition
	verdicts map[string]string // gate id -> recomputed verdict
	recorded map[string]string // gate id -> recorded verdict
	unusable []string          // why the final evaluation could not be recomputed
}

// checkGates recomputes every gates transition's verdicts and adds one check
// per gate. It returns what the final evaluation recomputed.
func (vr *verifier) checkGates(chain []*ledger.ChainNode, complete bool, specs []gate.Spec, compiled []compiledGate, pkgOK bool) (*finalVerdicts, error) {
	final := &finalVerdicts{verdicts: map[string]string{}, recorded: map[string]string{}}
	if !complete {
		final.unusable = append(final.unusable, "the transition chain cannot be read in full")
		vr.add(fail(CheckGatePrefix+"evaluation", "not recomputed: the transition chain cannot be read in full"))
		return final, nil
	}
	// Gather the evidence each gates transition saw, in chain order, as the
	// runtime's observe and mutation did.
	var evals []*evaluation
	var evs []gate.Evidence
	lastChange := map[string]time.Time{}
	var unusable []string
	var vouchings []ledger.Vouching // command evidence and the workspace it vouches for
	var seen cid.Cid                // the workspace the current gates transition observed
	for _, n := range chain {
		for j, ev := range n.Evidence {
			l := n.T.Evidence[j].Cid
			if ev == nil {
				unusable = append(unusable, fmt.Sprintf("evidence %s (transition seq %d) cannot be read", l, n.T.Seq))
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, ev.ObservedAt)
			if err != nil {
				unusable = append(unusable, fmt.Sprintf("evidence %s has observed_at %q, not RFC 3339", l, ev.ObservedAt))
				continue
			}
			evs = append(evs, gate.Evidence{Ref: l.String(), Kind: ev.Kind, Subject: ev.Subject, ObservedAt: at, Data: ev.Data})
			if ev.Kind == gate.KindMutation {
				lastChange[ev.Subject] = at
			}
			switch {
			case ev.Workspace == nil:
			case ev.Kind == ledger.KindWorkspace && n.T.Kind == "gates":
				seen = ev.Workspace.Cid
			case ev.Scope != nil:
				vouchings = append(vouchings, ledger.Vouching{Ref: l.String(), Step: ev.Step, Workspace: ev.Workspace.Cid, Scope: *ev.Scope})
			}
		}
		if n.T.Kind == "gates" {
			e := &evaluation{
				node: n, evidence: slices.Clone(evs), lastChange: maps.Clone(lastChange),
				unusable: slices.Clone(unusable),
			}
			// As the runtime did: the evidence of commands is judged
			// against the workspace this evaluation observed.
			if len(vouchings) > 0 {
				var err error
				switch {
				case !seen.Defined():
					e.unusable = append(e.unusable, fmt.Sprintf("gates transition seq %d observed no workspace, so the freshness of command evidence cannot be judged", n.T.Seq))
				default:
					if e.stale, err = ledger.StaleEvidence(vr.ctx, vr.st, vouchings, seen); err != nil {
						e.unusable = append(e.unusable, "workspace freshness: "+err.Error())
					}
				}
			}
			seen = cid.Undef
			evals = append(evals, e)
		}
	}
	if len(evals) == 0 {
		return final, nil
	}
	evals[len(evals)-1].final = true
	for _, e := range evals {
		vr.recompute(e, specs, compiled, pkgOK, final)
		if e.final {
			final.exists, final.node, final.unusable = true, e.node, e.unusable
		}
	}
	return final, nil
}

// recompute adds the gate checks of one evaluation.
func (vr *verifier) recompute(e *evaluation, specs []gate.Spec, compiled []compiledGate, pkgOK bool, final *finalVerdicts) {
	t := e.node.T
	name := func(id string) string {
		if e.final {
			return CheckGatePrefix + id
		}
		return fmt.Sprintf("%s%s (seq %d)", CheckGatePrefix, id, t.Seq)
	}
	add := vr.add
	// Env.Now is the instant the runtime evaluated at, which every result of
	// the transition records.
	var now time.Time
	var nowProblem string
	for j, g := range e.node.Gates {
		if g == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, g.At)
		switch {
		case err != nil:
			nowProblem = fmt.Sprintf("gate result %s has at %q, not RFC 3339", t.Gates[j].Cid, g.At)
		case now.IsZero():
			now = at
		case !at.Equal(now):
			nowProblem = fmt.Sprintf("the gate results of transition seq %d record different times (%s, %s)", t.Seq, now.Format(time.RFC3339Nano), g.At)
		}
	}
	recordedIDs := map[string]bool{}
	for j, g := range e.node.Gates {
		l := t.Gates[j].Cid
		if g == nil {
			add(fail(name("result "+l.String()), "gate result %s of transition seq %d cannot be read", l, t.Seq))
			continue
		}
		if recordedIDs[g.Gate] {
			add(fail(name(g.Gate), "recorded twice in transition seq %d (again in %s)", t.Seq, l))
			continue
		}
		recordedIDs[g.Gate] = true
		if e.final {
			final.recorded[g.Gate] = g.Verdict
		}
		if !pkgOK {
			add(fail(name(g.Gate), "recorded %s in %s; not recomputed: the package's gates cannot be read", g.Verdict, l))
			continue
		}
		i := slices.IndexFunc(specs, func(s gate.Spec) bool { return s.ID == g.Gate })
		if i < 0 {
			add(fail(name(g.Gate), "recorded %s in %s (transition seq %d), but the package does not define gate %q", g.Verdict, l, t.Seq, g.Gate))
			continue
		}
		if compiled[i].err != nil {
			add(fail(name(g.Gate), "recorded %s in %s; the package's gate does not compile now: %v", g.Verdict, l, compiled[i].err))
			continue
		}
		if len(e.unusable) > 0 || nowProblem != "" {
			why := append(slices.Clone(e.unusable), nowProblem)
			add(fail(name(g.Gate), "recorded %s in %s; cannot be recomputed: %s", g.Verdict, l, strings.Join(slices.DeleteFunc(why, func(s string) bool { return s == "" }), "; ")))
			continue
		}
		res := compiled[i].g.Evaluate(e.evidence, gate.Env{Now: now, LastChange: e.lastChange, Stale: e.stale})
		if e.final {
			final.verdicts[g.Gate] = string(res.Verdict)
		}
		var diffs []string
		if g.Verdict != string(res.Verdict) {
			diffs = append(diffs, res.Reason)
		}
		if g.Action != res.Action {
			diffs = append(diffs, fmt.Sprintf("action recorded %q, recomputed %q", g.Action, res.Action))
		}
		if p := specs[i].Predicate; g.Predicate != p {
			diffs = append(diffs, fmt.Sprintf("predicate recorded %q, the package's is %q", g.Predicate, p))
		}
		if rec := linkStrings(g.Read); !slices.Equal(rec, res.Read) {
			diffs = append(diffs, fmt.Sprintf("evidence read recorded %v, recomputed %v", rec, res.Read))
		}
		detail := fmt.Sprintf("recorded %s, recomputed %s", g.Verdict, res.Verdict)
		if len(diffs) > 0 {
			add(Check{Name: name(g.Gate), Detail: fmt.Sprintf("%s (gate result %s, transition seq %d): %s", detail, l, t.Seq, strings.Join(diffs, "; "))})
		} else {
			add(Check{Name: name(g.Gate), OK: true, Detail: detail})
		}
	}
	for _, s := range specs {
		if !recordedIDs[s.ID] {
			add(fail(name(s.ID), "the package defines gate %q but transition seq %d records no result for it", s.ID, t.Seq))
		}
	}
}

func (vr *verifier) checkStatus(r *ledger.Receipt, chain []*ledger.ChainNode, complete bool, specs []gate.Spec, pkgOK bool, final *finalVerdicts) {
	var probs problems
	switch r.Status {
	case ledger.StatusPass:
		if r.Halt != nil {
			probs.add("PASS with a halt record (%s: %s)", r.Halt.Verdict, r.Halt.Reason)
		}
		if r.Output == nil {
			probs.add("PASS without an output packet")
		} else if p, ok := vr.decoded[r.Output.Cid].(*ledger.Packet); ok && p.Schema != haygent.OutputSchema {
			probs.add("PASS with output packet %s checked against %q, not %s", r.Output.Cid, p.Schema, haygent.OutputSchema)
		}
		switch {
		case !complete:
			probs.add("PASS cannot be confirmed: the transition chain cannot be read in full")
		case !final.exists:
			probs.add("PASS but the chain holds no gate evaluation")
		default:
			if head := chain[len(chain)-1]; head != final.node {
				probs.add("PASS but transition seq %d (%s) ran after the final gate evaluation (seq %d)", head.T.Seq, head.T.Kind, final.node.T.Seq)
			}
			if !pkgOK {
				probs.add("PASS cannot be confirmed: the package's gates cannot be read")
			}
			if len(specs) == 0 && pkgOK {
				probs.add("PASS but the package defines no gates")
			}
			for _, s := range specs {
				rec, got := final.recorded[s.ID], final.verdicts[s.ID]
				switch {
				case rec == "":
					probs.add("PASS but gate %s has no recorded result in the final evaluation (seq %d)", s.ID, final.node.T.Seq)
				case got == "":
					probs.add("PASS but gate %s (recorded %s) could not be recomputed", s.ID, rec)
				case got != string(gate.Pass) || rec != string(gate.Pass):
					probs.add("PASS but gate %s is recorded %s and recomputed %s", s.ID, orDash(rec), got)
				}
			}
			if len(final.unusable) > 0 {
				probs.add("PASS cannot be confirmed: %s", final.unusable[0])
			}
		}
	case ledger.StatusHalt:
		if r.Halt == nil {
			probs.add("HALT without a halt record")
		}
		if r.Output != nil {
			probs.add("HALT with an output packet %s; only a PASS has one", r.Output.Cid)
		}
		if h := r.Halt; h != nil && h.FailedGate != "" {
			switch got, ok := final.verdicts[h.FailedGate]; {
			case !final.exists:
				probs.add("the halt names failed gate %s, but the chain holds no gate evaluation", h.FailedGate)
			case !ok:
				probs.add("the halt names failed gate %s (%s), which the final evaluation (seq %d) does not recompute", h.FailedGate, h.Verdict, final.node.T.Seq)
			case got != h.Verdict || got == string(gate.Pass):
				probs.add("the halt names failed gate %s with %s, but it is recomputed %s in the final evaluation (seq %d)", h.FailedGate, h.Verdict, got, final.node.T.Seq)
			}
		}
	default:
		probs.add("status %q is neither %s nor %s", r.Status, ledger.StatusPass, ledger.StatusHalt)
	}
	ok := fmt.Sprintf("%s is consistent with the recomputed gates", r.Status)
	if r.Status == ledger.StatusHalt && r.Halt != nil {
		ok = fmt.Sprintf("HALT (%s) is consistent with the recomputed gates", r.Halt.Verdict)
		if !final.exists {
			ok = fmt.Sprintf("HALT (%s) before any gate evaluation", r.Halt.Verdict)
		}
	}
	vr.add(probs.check(CheckStatus, ok))
}

func orDash(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}

// CheckUpstream is the check [VerifyReceiptChain] adds to a receipt whose
// input records upstream receipts.
const CheckUpstream = "upstream receipts"

// VerifyReceiptChain verifies receipt and, recursively, every upstream
// receipt its input packet records (the accepted receipts of a Work
// Order's nodes its input was built from), each once. It returns their
// verifications upstream first, receipt last. A receipt with upstream
// receipts gets one more check, "upstream receipts": each of them must
// verify and be a PASS.
func VerifyReceiptChain(ctx context.Context, st cas.Store, receipt cid.Cid, trusted []ed25519.PublicKey) ([]*Verification, error) {
	cv := NewChainVerifier(st, trusted, nil, nil)
	if _, err := cv.Verify(ctx, receipt); err != nil {
		return nil, err
	}
	return cv.All(), nil
}

// ChainVerifier verifies receipts with their upstream receipts, each
// receipt once however many receipts name it, and is safe for concurrent
// use: a run's nodes can be verified on every core.
type ChainVerifier struct {
	st      cas.Store
	trusted []ed25519.PublicKey
	known   map[cid.Cid]bool
	cache   *Cache

	mu    sync.Mutex
	memo  map[cid.Cid]*chainEntry
	order []*Verification
	nodes sync.Map // untyped objects decoded, shared by the receipts
}

type chainEntry struct {
	done chan struct{}
	v    *Verification
	err  error
}

// NewChainVerifier returns a verifier of receipts in st signed by one of
// trusted. known, which may be nil and must not change afterwards, holds
// closures the caller has verified (as [VerifyReceiptKnown] takes them):
// a run's package trees, walked once instead of once per receipt. cache
// is what its verifications remember (nil: a new [Cache] of its own).
func NewChainVerifier(st cas.Store, trusted []ed25519.PublicKey, known map[cid.Cid]bool, cache *Cache) *ChainVerifier {
	if cache == nil {
		cache = NewCache()
	}
	return &ChainVerifier{st: st, trusted: trusted, known: known, cache: cache, memo: map[cid.Cid]*chainEntry{}}
}

// Verify verifies receipt and its upstream receipts, recursively, or
// returns the verification made before. A receipt that is its own
// upstream, through any number of links (impossible with honest hashes),
// fails "upstream receipts" instead of waiting for itself.
func (cv *ChainVerifier) Verify(ctx context.Context, receipt cid.Cid) (*Verification, error) {
	return cv.verify(ctx, receipt, nil)
}

func (cv *ChainVerifier) verify(ctx context.Context, c cid.Cid, path []cid.Cid) (*Verification, error) {
	if slices.Contains(path, c) {
		return nil, nil
	}
	cv.mu.Lock()
	e, ok := cv.memo[c]
	if !ok {
		e = &chainEntry{done: make(chan struct{})}
		cv.memo[c] = e
	}
	cv.mu.Unlock()
	if ok {
		select {
		case <-e.done:
			return e.v, e.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(e.done)
	e.v, e.err = cv.verifyOne(ctx, c, append(path, c))
	if e.err == nil {
		cv.mu.Lock()
		cv.order = append(cv.order, e.v)
		cv.mu.Unlock()
	}
	return e.v, e.err
}

func (cv *ChainVerifier) verifyOne(ctx context.Context, c cid.Cid, path []cid.Cid) (*Verification, error) {
	v, err := verifyReceipt(ctx, cv.st, c, cv.trusted, cv.known, cv.cache, &cv.nodes)
	if err != nil || v.Input == nil || len(v.Input.Upstream) == 0 {
		return v, err
	}
	var probs problems
	for _, u := range v.Input.Upstream {
		uv, err := cv.verify(ctx, u.Cid, path)
		switch {
		case err != nil:
			return nil, err
		case uv == nil:
			probs.add("upstream %s links back to a receipt that needs it", u.Cid)
		case !uv.OK():
			probs.add("upstream %s does not verify: %s: %s", u.Cid, uv.FirstFailure().Name, uv.FirstFailure().Detail)
		case uv.Status != ledger.StatusPass:
			probs.add("upstream %s is a %s, not a PASS", u.Cid, uv.Status)
		}
	}
	v.Checks = append(v.Checks, probs.check(CheckUpstream, fmt.Sprintf("%d upstream receipts, each verified and PASS", len(v.Input.Upstream))))
	return v, nil
}

// All returns every verification made, each receipt after its upstream
// receipts.
func (cv *ChainVerifier) All() []*Verification {
	cv.mu.Lock()
	defer cv.mu.Unlock()
	return slices.Clone(cv.order)
}
