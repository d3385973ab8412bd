package verify

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"sync"

	"github.com/haygent/hg/cas"
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
	return verifyReceipt(ctx, st, receipt, trusted, known, cache, nil, nil)
}

// verifyReceipt is [VerifyReceiptKnown] sharing the untyped objects it
// decodes with the other receipts of a [ChainVerifier], when nodes is not
// nil: every receipt of a run links the same permission snapshot.
// upstream, when not nil, is told the upstream receipts the receipt's
// input names as soon as they are read, before the receipt's checks.
func verifyReceipt(ctx context.Context, st cas.Store, receipt cid.Cid, trusted []ed25519.PublicKey, known map[cid.Cid]bool, cache *Cache, nodes *sync.Map, upstream func(map[cid.Cid]bool)) (*Verification, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cache == nil {
		cache = NewCache()
	}
	vr := &verifier{
		ctx: ctx, st: st, v: &Verification{Receipt: receipt}, known: known, cache: cache, sharedNodes: nodes,
		bad: map[cid.Cid]string{}, decoded: map[cid.Cid]any{}, undecodable: map[cid.Cid]bool{}, misread: map[cid.Cid]bool{},
		onUpstream: upstream,
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
	onUpstream  func(map[cid.Cid]bool) // see verifyReceipt
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

// verify makes every check of the receipt rc, in the order of the table:
// the blocks and their canonical form (blocks.go), the chain and the
// receipt's index of it (chain.go), the signature and approvals
// (signature.go), the gates recomputed (gates.go) and the status
// (status.go).
func (vr *verifier) verify(rc cid.Cid, trusted []ed25519.PublicKey) error {
	v := vr.v
	upstream, err := vr.upstreamOf(rc)
	if err != nil {
		return err
	}
	if vr.onUpstream != nil && len(upstream) > 0 {
		vr.onUpstream(upstream)
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

	// Values the packets hold out of line (outlined.go) are read back
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
