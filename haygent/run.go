package haygent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/perm"
	"github.com/haygent/hg/haygent/sandbox"
	"github.com/haygent/hg/haygent/workspace"
	"github.com/ipfs/go-cid"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ErrBadInput is wrapped when the input packet breaks the input contract.
var ErrBadInput = errors.New("input does not satisfy the input contract")

// Options configure one invocation.
type Options struct {
	// Store receives every packet, evidence object, transition and the
	// receipt.
	Store cas.Store
	// Key signs the receipt.
	Key ed25519.PrivateKey
	// Signatures, when not nil, remembers the receipt's signature as
	// good: the cache of the verifier that checks the receipt next (a
	// scheduler's), which then need not run ed25519 again.
	Signatures *ledger.Signatures
	// Adapter answers the slots; nil makes every slot call fail (and so
	// take its fallback).
	Adapter Adapter
	// Workspace is the directory the Haygent works on; exec steps run in
	// scratch copies of it. Empty means a new empty directory.
	Workspace string
	// StoreDir is the directory of the hg store the run belongs to. If
	// it lies inside Workspace, no step sees or changes it, as no step
	// sees or changes any directory named .haygent there; nor does the
	// receipt's workspace snapshot hold it (see workspace.Fence).
	StoreDir string
	// CacheDir holds tool caches (GOCACHE...) shared by exec steps;
	// empty means a directory under the user's cache.
	CacheDir string
	// AllowUnisolated lets exec steps run without their whole
	// confinement where it cannot be had; the receipt's limitations say
	// so. It is ignored when RequireIsolation is set or the manifest
	// requires isolation.
	AllowUnisolated bool
	// RequireIsolation forbids running any exec step unisolated (a Work
	// Order node that requires isolation).
	RequireIsolation bool
	// Now is the clock; nil means time.Now. Tests fix it.
	Now func() time.Time
	// RunID names the run; empty means a random one.
	RunID string
	// Replay is the command line that replays this run, for the receipt.
	Replay string
	// Log, if set, is told of each step as it starts and ends.
	Log func(format string, args ...any)
	// PackageCID, if defined, is the CID of the package tree, already in
	// Store: the runtime then does not store the package again.
	PackageCID cid.Cid
	// Upstream lists the accepted receipts the input was built from (in a
	// Work Order); they are recorded in the input packet.
	Upstream []cid.Cid
	// CheckUpstream, if set, re-checks each upstream receipt before the
	// first step; an error halts the run before anything executes.
	CheckUpstream func(ctx context.Context, receipt cid.Cid) error
}

// Result is what an invocation produced.
type Result struct {
	Receipt    *ledger.Receipt
	ReceiptCID cid.Cid
}

// Run invokes the Haygent pkg on input. The receipt is built from the
// ledger alone, signed and stored; its CID is the result. A HALT is a
// normal outcome (err is nil, Receipt.Status is HALT); err is for runs that
// could not be carried out at all: a bad input, a store that fails.
func Run(ctx context.Context, pkg *Package, input map[string]any, opts Options) (*Result, error) {
	if opts.Store == nil || opts.Key == nil {
		return nil, errors.New("haygent: Run needs a store and a key")
	}
	if err := validate(pkg.Input, input); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	r := &runner{pkg: pkg, opts: opts, st: opts.Store, ctx: ctx, w: cas.NewWriter(opts.Store), observedSeq: -1}
	if r.opts.Now == nil {
		r.opts.Now = time.Now
	}
	if r.opts.RunID == "" {
		var b [8]byte
		rand.Read(b[:])
		r.opts.RunID = "run-" + hex.EncodeToString(b[:])
	}
	if r.opts.Replay == "" {
		r.opts.Replay = "hg replay " + r.opts.RunID
	}
	if r.opts.Log == nil {
		r.opts.Log = func(string, ...any) {}
	}
	return r.run(input)
}

// runner is one invocation in progress: the ledger and the state.
type runner struct {
	ctx  context.Context // for the store: the ledger is written even after the run's time is up
	work context.Context // for steps and slots: ends at the run's time limit
	pkg  *Package
	opts Options
	st   cas.Store
	w    *cas.Writer // the ledger's blocks, stored in batches

	pkgCID, inputCID, permCID cid.Cid
	workspace                 string // "" until a step needs one, when Options.Workspace is empty
	tempWorkspace             bool   // workspace is a temporary directory this run made
	state                     map[string]any

	seq         int64
	prior       *cas.Link
	transitions int64
	steps       []ledger.StepRun
	evidence    []gate.Evidence // everything observed, for the gates
	evLinks     []cas.Link
	slotCalls   []cas.Link
	denied      []ledger.Denied
	used        map[string]bool
	limitations []string
	vouchings   []ledger.Vouching // evidence that vouches for a workspace, for the gates' freshness
	// observed is the workspace the last evaluation of the gates
	// observed, and observedSeq the seq of its transition (-1: none).
	observed    cid.Cid
	observedSeq int64
	artifacts   map[string]ledger.Artifact
	lastChange  map[string]time.Time
	attempt     int64
	started     time.Time
}

func (r *runner) now() time.Time { return r.opts.Now().UTC() }

// put stores a typed object and returns its link.
func (r *runner) put(v any) (cas.Link, error) {
	data, err := cas.Marshal(v)
	if err != nil {
		return cas.Link{}, err
	}
	if len(data) > cas.MaxBlockSize {
		// A packet goes within the limit with values stored apart
		// (largevalue.go); anything else over it is refused.
		if data, err = r.fitBlock(v, data); err != nil {
			return cas.Link{}, err
		}
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := r.w.Add(r.ctx, b); err != nil {
		return cas.Link{}, err
	}
	return cas.Link{Cid: b.CID()}, nil
}

// putRaw stores bytes the runner did not make (a step's output, an
// adapter's response). It stores a copy: an in-memory store keeps the
// blocks it is handed, and whoever made the bytes may use them again.
func (r *runner) putRaw(data []byte) (cas.Link, error) {
	if len(data) > cas.ChunkSize {
		c, _, err := cas.PutFile(r.ctx, r.st, bytes.NewReader(data), nil)
		return cas.Link{Cid: c}, err
	}
	b := cas.NewBlock(cas.Raw, bytes.Clone(data))
	return cas.Link{Cid: b.CID()}, r.w.Add(r.ctx, b)
}

func (r *runner) packet(payload map[string]any, schema string) (cas.Link, error) {
	// The packet is encoded at once and dropped: a payload already in
	// data-model form needs no normalized copy.
	if !cas.IsNormal(payload) {
		payload = cas.FromJSON(payload).(map[string]any)
	}
	return r.put(&ledger.Packet{Type: ledger.TypePacket, Schema: schema, Payload: payload})
}

func (r *runner) run(input map[string]any) (*Result, error) {
	if err := checkInputLinks(input); err != nil {
		return nil, err
	}
	r.started = r.now()
	r.used = map[string]bool{}
	r.artifacts = map[string]ledger.Artifact{}
	r.lastChange = map[string]time.Time{}
	var err error
	if r.opts.PackageCID.Defined() {
		ok, err := r.st.Has(r.ctx, r.opts.PackageCID)
		if err != nil {
			return nil, fmt.Errorf("look up package %s: %w", r.opts.PackageCID, err)
		}
		if !ok {
			return nil, fmt.Errorf("package %s is not in the store", r.opts.PackageCID)
		}
		r.pkgCID = r.opts.PackageCID
	} else if r.pkgCID, err = cas.PutTree(r.ctx, r.st, r.pkg.Dir, nil); err != nil {
		return nil, fmt.Errorf("store package: %w", err)
	}
	inPacket := &ledger.Packet{Type: ledger.TypePacket, Schema: InputSchema, Payload: cas.FromJSON(input).(map[string]any)}
	for _, u := range r.opts.Upstream {
		inPacket.Upstream = append(inPacket.Upstream, cas.Link{Cid: u})
	}
	in, err := r.put(inPacket)
	if err != nil {
		return nil, tooLargeInput(err)
	}
	r.inputCID = in.Cid
	snap := map[string]any{"type": "hg/permissions@1", "entries": anySlice(r.pkg.Permissions.Snapshot())}
	data, err := cas.EncodeNode(snap)
	if err != nil {
		return nil, err
	}
	pb := cas.NewBlock(cas.DagCBOR, data)
	if err := r.w.Add(r.ctx, pb); err != nil {
		return nil, err
	}
	r.permCID = pb.CID()

	// Without a workspace, an empty directory is made only when a step
	// touches files: builtin-only work needs none.
	r.workspace = r.opts.Workspace
	defer func() {
		if r.tempWorkspace {
			os.RemoveAll(r.workspace)
		}
	}()
	wsLink, err := r.snapshotWorkspace()
	if err != nil {
		return nil, fmt.Errorf("snapshot workspace: %w", err)
	}

	runTimeout, _ := time.ParseDuration(r.pkg.Manifest.Timeouts.Run)
	ctx, cancel := context.WithTimeout(r.ctx, runTimeout)
	defer cancel()
	r.work = ctx

	r.state = map[string]any{
		"input":      cas.FromJSON(input), // a copy in data-model form
		"adjustable": cas.FromJSON(adjustableDefaults(r.pkg.AdjustRaw)),
		"steps":      map[string]any{},
		"output":     map[string]any{},
	}
	if r.opts.CheckUpstream != nil {
		for _, u := range r.opts.Upstream {
			if err := r.opts.CheckUpstream(r.work, u); err != nil {
				// A re-check cut short by the caller or by the run's time
				// limit says nothing against the upstream receipt: it is
				// no UPSTREAM halt, and with no step recorded yet there is
				// no chain to sign.
				if cerr := r.ctx.Err(); cerr != nil {
					return nil, cerr
				}
				if r.work.Err() != nil {
					return nil, fmt.Errorf("haygent: the run ended before its first step: run time limit of %s reached while re-checking upstream receipt %s: %v", r.pkg.Manifest.Timeouts.Run, u, err)
				}
				halt := &ledger.Halt{Verdict: "UPSTREAM", Reason: "upstream receipt " + u.String() + " failed its re-check: " + err.Error(), RestartPoint: r.pkg.Spine.Steps[0].ID}
				rec, err := r.begin(Step{ID: "upstream"}, "upstream")
				if err != nil {
					return nil, err
				}
				rec.status, rec.note = "halted", halt.Reason
				if err := r.record(rec); err != nil {
					return nil, err
				}
				return r.finish(halt, nil, wsLink)
			}
		}
	}
	halt, results, err := r.loop()
	if err != nil {
		return nil, err
	}
	return r.finish(halt, results, wsLink)
}

// loop walks the spine, evaluates the gates, and repairs within the
// budget. It returns the halt (nil on PASS) and the final gate results.
func (r *runner) loop() (*ledger.Halt, []gateOutcome, error) {
	from := 0
	var tried [][]byte // proposals already tried, to stop a loop that repeats itself
	for {
		halt, err := r.walk(from)
		if err != nil {
			return nil, nil, err
		}
		if halt != nil {
			return halt, nil, nil
		}
		results, err := r.evaluateGates()
		if err != nil {
			return nil, nil, err
		}
		failed := firstFailed(results)
		if failed == nil {
			return nil, results, nil
		}
		h := &ledger.Halt{
			FailedGate:   failed.res.Gate,
			Verdict:      string(failed.res.Verdict),
			Reason:       failed.res.Reason,
			Attempts:     r.attempt,
			LastEvidence: failed.read,
			RestartPoint: r.restartPoint(),
		}
		if failed.res.Action == gate.ActionHalt {
			h.Reason = "gate " + failed.res.Gate + " says halt on " + string(failed.res.Verdict) + ": " + failed.res.Reason
			return h, results, nil
		}
		rep := r.pkg.Manifest.Repair
		if rep == nil || (len(rep.Gates) > 0 && !slices.Contains(rep.Gates, failed.res.Gate)) {
			h.Reason = "no repair declared for gate " + failed.res.Gate + ": " + failed.res.Reason
			return h, results, nil
		}
		if r.attempt >= int64(r.pkg.Manifest.RepairBudget) {
			h.Reason = fmt.Sprintf("repair budget of %d exhausted: %s", r.pkg.Manifest.RepairBudget, failed.res.Reason)
			return h, results, nil
		}
		r.attempt++
		r.state["failures"] = failureView(results)
		proposal, shalt, err := r.callSlot(rep.Slot, "repair", "repair")
		if err != nil {
			return nil, nil, err
		}
		if shalt != nil {
			shalt.Attempts, shalt.FailedGate, shalt.Verdict = r.attempt, failed.res.Gate, string(failed.res.Verdict)
			shalt.LastEvidence = failed.read
			// The repair slot is no step of the spine: a rerun starts
			// where a repair would have.
			shalt.RestartPoint = r.restartPoint()
			return shalt, results, nil
		}
		if proposal != nil {
			canon, _ := json.Marshal(proposal)
			for _, p := range tried {
				if bytes.Equal(p, canon) {
					h.Attempts = r.attempt
					h.Reason = "repair proposed the same values again; stopping early: " + failed.res.Reason
					return h, results, nil
				}
			}
			tried = append(tried, canon)
		}
		from = 0
		if rep.RerunFrom != "" {
			from = r.stepIndex(rep.RerunFrom)
		}
	}
}

func (r *runner) stepIndex(id string) int {
	for i, s := range r.pkg.Spine.Steps {
		if s.ID == id {
			return i
		}
	}
	return 0
}

func (r *runner) restartPoint() string {
	if rep := r.pkg.Manifest.Repair; rep != nil && rep.RerunFrom != "" {
		return rep.RerunFrom
	}
	return r.pkg.Spine.Steps[0].ID
}

// walk runs the spine from step index from.
func (r *runner) walk(from int) (*ledger.Halt, error) {
	for _, s := range r.pkg.Spine.Steps[from:] {
		if err := r.work.Err(); err != nil {
			if cerr := r.ctx.Err(); cerr != nil {
				return nil, cerr // the caller gave up on the run: no receipt
			}
			return &ledger.Halt{Verdict: string(gate.Timeout), Reason: "run time limit of " + r.pkg.Manifest.Timeouts.Run + " reached before step " + s.ID, Attempts: r.attempt, RestartPoint: s.ID}, nil
		}
		r.opts.Log("step %s (%s)", s.ID, s.Kind)
		var (
			halt *ledger.Halt
			err  error
		)
		switch s.Kind {
		case StepExec:
			halt, err = r.execStep(s)
		case StepBuiltin:
			halt, err = r.builtinStep(s)
		case StepSlot:
			_, halt, err = r.callSlot(s.Slot, s.ID, StepSlot)
		}
		if err != nil || halt != nil {
			if halt != nil {
				halt.Attempts = r.attempt
				if halt.RestartPoint == "" {
					halt.RestartPoint = s.ID
				}
			}
			return halt, err
		}
	}
	return nil, nil
}

// stepRecord is what a step hands to the ledger.
type stepRecord struct {
	step      Step
	kind      string
	input     cas.Link // the state the step started from
	started   time.Time
	status    string
	evidence  []cas.Link
	slotCalls []cas.Link
	gates     []cas.Link
	denied    []ledger.Denied
	adapter   string
	note      string
}

// record writes the transition of a step, chained to the one before.
func (r *runner) record(rec stepRecord) error {
	out, err := r.packet(r.state, "")
	if err != nil {
		return err
	}
	t := ledger.Transition{
		Type: ledger.TypeTransition, Run: r.opts.RunID, Seq: r.seq, Step: rec.step.ID, Kind: rec.kind,
		Attempt: r.attempt, Input: rec.input, Output: out, Package: cas.Link{Cid: r.pkgCID},
		Adapter: rec.adapter, Permissions: cas.Link{Cid: r.permCID},
		StartedAt: ledger.Stamp(rec.started), FinishedAt: ledger.Stamp(r.now()), Status: rec.status,
		Evidence: orEmpty(rec.evidence), SlotCalls: orEmpty(rec.slotCalls), Gates: orEmpty(rec.gates),
		Denied: rec.denied, Note: rec.note, Prior: r.prior,
	}
	if t.Denied == nil {
		t.Denied = []ledger.Denied{}
	}
	link, err := r.put(&t)
	if err != nil {
		return err
	}
	r.prior = &link
	r.seq++
	r.transitions++
	r.steps = append(r.steps, ledger.StepRun{Step: rec.step.ID, Kind: rec.kind, Attempt: r.attempt, Status: rec.status})
	r.denied = append(r.denied, rec.denied...)
	r.opts.Log("  %s: %s", rec.step.ID, rec.status)
	return nil
}

// begin starts the record of a step. The state it starts from is stored
// as a packet at once, so no copy of the state is kept meanwhile.
func (r *runner) begin(step Step, kind string) (stepRecord, error) {
	in, err := r.packet(r.state, "")
	return stepRecord{step: step, kind: kind, input: in, started: r.now(), status: "ok"}, err
}

func orEmpty(l []cas.Link) []cas.Link {
	if l == nil {
		return []cas.Link{}
	}
	return l
}

// observe stores one piece of evidence and keeps it for the gates.
func (r *runner) observe(step, kind, subject string, data map[string]any) (cas.Link, error) {
	return r.observeAt(step, kind, subject, data, r.now())
}

// observeAt records evidence observed at a given instant. The gates judge
// the data exactly as stored: it goes through the canonical encoding
// first, so what the runtime evaluates and what a verifier reads back are
// the same values.
func (r *runner) observeAt(step, kind, subject string, data map[string]any, at time.Time) (cas.Link, error) {
	return r.observeOn(step, kind, subject, data, at, nil)
}

// observeOn records evidence; with on, evidence that vouches for the
// workspace on.workspace, within on.scope (see freshness.go).
func (r *runner) observeOn(step, kind, subject string, data map[string]any, at time.Time, on *ledger.Vouching, outputs ...cas.Link) (cas.Link, error) {
	enc, err := cas.EncodeNode(cas.FromJSON(data))
	if err != nil {
		return cas.Link{}, fmt.Errorf("evidence %s: %w", kind, err)
	}
	stored, err := cas.DecodeNode(enc)
	if err != nil {
		return cas.Link{}, fmt.Errorf("evidence %s: %w", kind, err)
	}
	cov := evidence.CoverageOf(kind)
	ev := ledger.Evidence{
		Type: ledger.TypeEvidence, Run: r.opts.RunID, Step: step, Attempt: r.attempt, Kind: kind, Subject: subject,
		Data: stored.(map[string]any), ObservedAt: ledger.Stamp(at),
		Coverage: ledger.Coverage{Establishes: orEmptyS(cov.Establishes), DoesNotEstablish: orEmptyS(cov.DoesNotEstablish)},
	}
	if len(outputs) > 0 {
		ev.Outputs = outputs
	}
	if on != nil {
		ev.Workspace = &cas.Link{Cid: on.Workspace}
		if kind != ledger.KindWorkspace {
			ev.Scope = &ledger.Scope{Covers: orEmptyS(on.Scope.Covers), Excludes: orEmptyS(on.Scope.Excludes)}
		}
	}
	link, err := r.put(&ev)
	if err != nil {
		return cas.Link{}, err
	}
	if on != nil && kind != ledger.KindWorkspace {
		r.vouchings = append(r.vouchings, ledger.Vouching{Ref: link.String(), Step: step, Workspace: on.Workspace, Scope: *ev.Scope})
	}
	r.evidence = append(r.evidence, gate.Evidence{Ref: link.String(), Kind: kind, Subject: subject, Data: ev.Data, ObservedAt: at})
	r.evLinks = append(r.evLinks, link)
	return link, nil
}

func orEmptyS(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (r *runner) deny(d perm.Denial) ledger.Denied {
	return ledger.Denied{Verb: d.Op.Verb, Kind: d.Op.Kind, Target: d.Op.Target, Rule: d.Rule}
}

// afterDenial decides what a step's denials do to the run.
func (r *runner) afterDenial(s Step, denied []ledger.Denied) *ledger.Halt {
	if len(denied) == 0 || s.OnDenied == "continue" {
		return nil
	}
	d := denied[0]
	return &ledger.Halt{
		Verdict:      "DENIED",
		Reason:       fmt.Sprintf("step %s: %s:%s:%s denied by %s", s.ID, d.Verb, d.Kind, d.Target, d.Rule),
		RestartPoint: s.ID,
	}
}

// ---- exec steps ----

func (r *runner) execStep(s Step) (*ledger.Halt, error) {
	rec, err := r.begin(s, StepExec)
	if err != nil {
		return nil, err
	}
	argv, err := r.pkg.Permissions.Command(s.Command)
	if err != nil {
		rec.status = "denied"
		rec.denied = []ledger.Denied{{Verb: "run", Kind: "command", Target: s.Command, Rule: perm.RuleDefault}}
		if err := r.record(rec); err != nil {
			return nil, err
		}
		return r.afterDenial(s, rec.denied), nil
	}
	r.used["run:command:"+s.Command] = true
	scratch, err := os.MkdirTemp("", "hg-step-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	work := filepath.Join(scratch, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	if err := r.needWorkspace(); err != nil {
		return nil, err
	}
	// The workspace the command runs on, which its evidence vouches for.
	taken, err := r.snapshotWorkspace()
	if err != nil {
		return nil, fmt.Errorf("step %s: snapshot workspace: %w", s.ID, err)
	}
	on := &ledger.Vouching{Step: s.ID, Workspace: taken.Cid, Scope: ledger.Scope{Covers: s.Covers, Excludes: s.Outputs}}
	before, err := workspace.Scratch(r.workspace, r.pkg.Permissions, work, r.opts.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("step %s: scratch copy: %w", s.ID, err)
	}
	cache := r.opts.CacheDir
	if cache == "" {
		if uc, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(uc, "hg")
		} else {
			cache = filepath.Join(scratch, "cache")
		}
	}
	env := sandbox.DefaultEnv(map[string]string{
		"HOME":       filepath.Join(scratch, "home"),
		"TMPDIR":     filepath.Join(scratch, "tmp"),
		"GOCACHE":    filepath.Join(scratch, "gocache"), // the shared one, overlaid
		"GOMODCACHE": filepath.Join(cache, "gomod"),
		"GOPATH":     filepath.Join(cache, "gopath"),
	})
	sharedGoCache := filepath.Join(cache, "gocache")
	for _, d := range []string{env["HOME"], env["TMPDIR"], sharedGoCache, env["GOMODCACHE"], env["GOPATH"]} {
		os.MkdirAll(d, 0o700)
	}
	var secrets []string
	for _, name := range s.Secrets {
		if !r.pkg.Permissions.Check(perm.Op{Verb: "secret", Kind: "env", Target: name}).Allowed {
			rec.denied = append(rec.denied, ledger.Denied{Verb: "secret", Kind: "env", Target: name, Rule: perm.RuleDefault})
			continue
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			return nil, fmt.Errorf("step %s: secret %s is granted but not set in the environment", s.ID, name)
		}
		r.used["secret:"+name] = true
		env[name] = v
		secrets = append(secrets, v)
	}
	timeout, _ := time.ParseDuration(r.pkg.Manifest.Timeouts.Step)
	if s.Timeout != "" {
		timeout, _ = time.ParseDuration(s.Timeout)
	}
	spec := sandbox.Spec{
		Argv: argv, Dir: work, Env: env, Timeout: timeout,
		NoNetwork: r.pkg.Permissions.NetworkNone(), AllowUnisolated: r.mayRunUnisolated(),
		Secrets: secrets,
		// The step writes only its scratch directory (its copy of the
		// workspace, HOME and TMPDIR); the toolchain and the shared caches
		// it may only read, so no step can change what a later one builds.
		// It sees the shared build cache through an overlay whose
		// additions go when the step does.
		Confine:  true,
		Write:    []string{scratch},
		Read:     append(toolchainPaths(), sharedGoCache, env["GOMODCACHE"], env["GOPATH"]),
		Overlays: []sandbox.Overlay{{Lower: sharedGoCache, Target: env["GOCACHE"]}},
		// The workspace (the step works on a copy of what its grants let
		// it read) and the store are never in its view, even where they
		// lie under a path it may read.
		Hide: []string{r.workspace, r.opts.StoreDir},
	}
	if !spec.NoNetwork {
		set := r.pkg.Permissions
		spec.NetCheck = func(hostport string) (bool, string) {
			d := set.Check(perm.Op{Verb: perm.VerbNetwork, Kind: perm.KindHost, Target: hostport})
			return d.Allowed, d.Rule
		}
	}
	r.warmGoCache(spec, sharedGoCache)
	reportFormat, reportFile, _ := strings.Cut(s.Report, ":")
	var reportBefore fileMark
	if reportFile != "" {
		reportBefore = markFile(work, reportFile)
	}
	res, err := sandbox.Run(r.work, spec)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		if errors.Is(err, sandbox.ErrNoIsolation) {
			return nil, fmt.Errorf("step %s: %w%s", s.ID, err, r.unisolatedHint())
		}
		return nil, fmt.Errorf("step %s: %w", s.ID, err)
	}
	for _, d := range res.NetDenials {
		rec.denied = append(rec.denied, ledger.Denied{Verb: perm.VerbNetwork, Kind: perm.KindHost, Target: string(sandbox.Redact([]byte(d.Target), secrets)), Rule: d.Rule})
	}
	if res.NetDenialsDropped > 0 {
		rec.denied = append(rec.denied, ledger.Denied{Verb: perm.VerbNetwork, Kind: perm.KindHost, Target: fmt.Sprintf("(%d more)", res.NetDenialsDropped), Rule: "more refused connections than are recorded one by one"})
	}
	if err != nil {
		res.TimedOut = true // the run's time limit ended the step
	}
	for _, l := range res.Limitations {
		r.limitations = appendOnce(r.limitations, "step "+s.ID+": "+l)
	}
	stdout, err := r.putRaw(res.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := r.putRaw(res.Stderr)
	if err != nil {
		return nil, err
	}
	subject := "step:" + s.ID
	exitData := map[string]any{
		"code": int64(res.ExitCode), "timed_out": res.TimedOut, "signal": res.Signal,
		"argv": anySlice(argv), "stdout": stdout.String(), "stderr": stderr.String(),
		"stdout_truncated": res.StdoutTruncated, "stderr_truncated": res.StderrTruncated,
		"isolation":   anySlice(res.Isolation),
		"duration_ms": res.Finished.Sub(res.Started).Milliseconds(),
	}
	link, err := r.observeOn(s.ID, evidence.KindExit, subject, exitData, r.now(), on, stdout, stderr)
	if err != nil {
		return nil, err
	}
	rec.evidence = append(rec.evidence, link)
	if res.ExitCode != 0 {
		rec.status = "failed"
	}
	if s.Report != "" {
		format, file := reportFormat, reportFile
		src := res.Stdout
		var unreadable string
		if file != "" {
			src, unreadable = readReport(work, file)
		}
		var data map[string]any
		if unreadable != "" {
			data = (&evidence.TestReport{Format: format, Problems: []string{unreadable}}).Data()
			data["invalid"] = unreadable
		} else if why := reportNotWritten(s.ID, file, reportBefore, markOf(src)); file != "" && src != nil && why != "" {
			data = (&evidence.TestReport{Format: format, Problems: []string{why}}).Data()
			data["invalid"] = why
		} else if file != "" && sandbox.Holds(src, secrets) {
			// Parsed, it would put the secret into names and messages.
			data = (&evidence.TestReport{Format: format, Problems: []string{
				"report " + file + " holds the value of a granted secret: refused as evidence"}}).Data()
		} else if rep, perr := evidence.ParseTestReport(format, bytes.NewReader(src)); perr != nil {
			data = (&evidence.TestReport{Format: format, Problems: []string{perr.Error()}}).Data()
		} else {
			data = rep.Data()
		}
		// Every string taken from the step's output is redacted before
		// it is stored, as the output itself is.
		data = redactStrings(data, secrets).(map[string]any)
		link, err := r.observeOn(s.ID, evidence.KindTestReport, subject, data, r.now(), on)
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	}
	// Changes the command made: applied where the write grants allow,
	// denied and recorded everywhere else.
	changes, err := workspace.Diff(before, work)
	if err != nil {
		return nil, fmt.Errorf("step %s: diff: %w", s.ID, err)
	}
	// A file holding a granted secret's value is never applied or stored.
	var clean workspace.Changes
	for _, c := range changes {
		if !utf8.ValidString(c.Path) {
			rec.denied = append(rec.denied, ledger.Denied{Verb: "write", Kind: "file", Target: strings.ToValidUTF8(c.Path, "\uFFFD"), Rule: "its name is not valid UTF-8"})
			continue
		}
		if sandbox.Holds([]byte(c.Path), secrets) {
			rec.denied = append(rec.denied, ledger.Denied{Verb: "write", Kind: "file", Target: string(sandbox.Redact([]byte(c.Path), secrets)), Rule: "its name holds the value of a granted secret"})
			continue
		}
		if c.After != nil && len(secrets) > 0 {
			if data, err := os.ReadFile(filepath.Join(work, filepath.FromSlash(c.Path))); err == nil && sandbox.Holds(data, secrets) {
				rec.denied = append(rec.denied, ledger.Denied{Verb: "write", Kind: "file", Target: c.Path, Rule: "holds the value of a granted secret"})
				continue
			}
		}
		clean = append(clean, c)
	}
	applied, denials, err := workspace.Apply(clean, work, r.workspace, r.pkg.Permissions, r.opts.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("step %s: apply: %w", s.ID, err)
	}
	for _, d := range denials {
		rec.denied = append(rec.denied, r.deny(d))
	}
	for _, c := range applied {
		var before, after string
		if c.Before != nil {
			before = c.Before.Digest
		}
		if c.After != nil {
			after = c.After.Digest
		}
		link, err := r.mutation(s.ID, c.Path, before, after)
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	}
	r.state["steps"].(map[string]any)[s.ID] = map[string]any{"exit": int64(res.ExitCode), "timed_out": res.TimedOut}
	if len(rec.denied) > 0 && rec.status == "ok" {
		rec.status = "denied"
	}
	if err := r.record(rec); err != nil {
		return nil, err
	}
	return r.afterDenial(s, rec.denied), nil
}

// mutation records a change to a workspace file and stores the new
// content as an artifact.
func (r *runner) mutation(step, path, before, after string) (cas.Link, error) {
	at := r.now()
	data := map[string]any{"path": path, "before": before, "after": after}
	if after != "" {
		f, err := os.Open(filepath.Join(r.workspace, filepath.FromSlash(path)))
		if err == nil {
			c, _, err := cas.PutFile(r.ctx, r.st, f, nil)
			f.Close()
			if err != nil {
				return cas.Link{}, err
			}
			r.artifacts[path] = ledger.Artifact{Path: path, File: cas.Link{Cid: c}, Digest: after}
			data["file"] = c.String()
		}
	} else {
		delete(r.artifacts, path)
	}
	r.lastChange["file:"+path] = at
	r.used["write:file:"+path] = true
	return r.observeAt(step, evidence.KindMutation, "file:"+path, data, at)
}

// ---- builtin steps ----

func (r *runner) builtinStep(s Step) (*ledger.Halt, error) {
	rec, err := r.begin(s, StepBuiltin)
	if err != nil {
		return nil, err
	}
	str := func(k string) string { v, _ := s.Args[k].(string); return v }
	fail := func(format string, args ...any) {
		rec.status = "failed"
		rec.note = fmt.Sprintf(format, args...)
	}
	var ws *workspace.Workspace
	switch s.Op {
	case "write_file", "read_file", "roundtrip", "digest":
		if err := r.needWorkspace(); err != nil {
			return nil, err
		}
		var err error
		if ws, err = workspace.Open(r.workspace, r.pkg.Permissions, r.opts.StoreDir); err != nil {
			return nil, err
		}
		defer ws.Close()
	}
	switch s.Op {
	case "noop":
	case "copy_field":
		v, ok := pointerGet(r.state, str("from"))
		if !ok {
			fail("copy_field: nothing at %s", str("from"))
			break
		}
		if err := pointerSet(r.state, str("to"), cloneValue(v)); err != nil {
			fail("copy_field: %v", err)
		}
	case "digest":
		var content []byte
		subject := "field:" + str("from")
		if p := str("file"); p != "" {
			subject = "file:" + p
			data, err := ws.ReadFile(p)
			if err != nil {
				fail("digest: %v", err)
				break
			}
			r.used["read:file:"+p] = true
			content = data
		} else {
			v, ok := pointerGet(r.state, str("from"))
			if !ok {
				fail("digest: nothing at %s", str("from"))
				break
			}
			content, _ = json.Marshal(v)
		}
		sum := sha256.Sum256(content)
		link, err := r.observe(s.ID, evidence.KindDigest, subject, map[string]any{"sha256": hex.EncodeToString(sum[:]), "size": int64(len(content))})
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	case "approval":
		// An approval from the state, checked against the subject the
		// step sees now, at the instant of use.
		v, ok := pointerGet(r.state, str("from"))
		if !ok {
			fail("approval: nothing at %s", str("from"))
			break
		}
		a, err := ledger.ApprovalFromValue(v)
		if err != nil {
			fail("approval at %s: %v", str("from"), err)
			break
		}
		subject, _ := pointerGet(r.state, str("subject"))
		observed, now := ledger.SubjectDigest(subject), r.now()
		problem := ledger.CheckApproval(a, observed, now, r.pkg.Manifest.Approvers)
		link, err := r.observeAt(s.ID, evidence.KindApproval, "step:"+s.ID, ledger.ApprovalData(a, observed, problem), now)
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	case "digest_equal":
		a, okA := pointerGet(r.state, str("a"))
		b, okB := pointerGet(r.state, str("b"))
		da, db := ledger.SubjectDigest(a), ledger.SubjectDigest(b)
		link, err := r.observe(s.ID, evidence.KindDigest, "step:"+s.ID, map[string]any{
			"a": da, "b": db, "equal": okA && okB && da == db,
		})
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	case "write_file":
		p := str("path")
		var content []byte
		if tmpl := str("template"); tmpl != "" {
			t, err := template.New(s.ID).Option("missingkey=error").Parse(tmpl)
			if err != nil {
				fail("write_file: template: %v", err)
				break
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, r.state); err != nil {
				fail("write_file: template: %v", err)
				break
			}
			content = buf.Bytes()
		} else {
			v, ok := pointerGet(r.state, str("from"))
			s, isStr := v.(string)
			if !ok || !isStr {
				fail("write_file: no string at %s", str("from"))
				break
			}
			content = []byte(s)
		}
		beforeSum := ""
		if old, err := ws.ReadFile(p); err == nil {
			sum := sha256.Sum256(old)
			beforeSum = hex.EncodeToString(sum[:])
		}
		if err := ws.WriteFile(p, content, 0o644); err != nil {
			fail("write_file: %v", err)
			break
		}
		sum := sha256.Sum256(content)
		link, err := r.mutation(s.ID, p, beforeSum, hex.EncodeToString(sum[:]))
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	case "read_file":
		p := str("path")
		if from := str("path_from"); from != "" {
			v, _ := pointerGet(r.state, from)
			p, _ = v.(string)
		}
		data, err := ws.ReadFile(p)
		if err != nil {
			fail("read_file: %v", err)
			break
		}
		r.used["read:file:"+p] = true
		sum := sha256.Sum256(data)
		link, err := r.observe(s.ID, evidence.KindRead, "file:"+p, map[string]any{"path": p, "sha256": hex.EncodeToString(sum[:]), "size": int64(len(data))})
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
		if to := str("to"); to != "" {
			if err := pointerSet(r.state, to, string(data)); err != nil {
				fail("read_file: %v", err)
			}
		}
	case "roundtrip":
		p := str("path")
		data, err := ws.ReadFile(p)
		if err != nil {
			fail("roundtrip: %v", err)
			break
		}
		r.used["read:file:"+p] = true
		in := sha256.Sum256(data)
		c, _, err := cas.PutFile(r.ctx, r.st, bytes.NewReader(data), nil)
		if err != nil {
			return nil, err
		}
		h := sha256.New()
		if _, err := cas.ReadFile(r.ctx, r.st, c, h, nil); err != nil {
			return nil, err
		}
		out := h.Sum(nil)
		link, err := r.observe(s.ID, evidence.KindDigest, "file:"+p, map[string]any{
			"input": hex.EncodeToString(in[:]), "output": hex.EncodeToString(out), "file": c.String(),
			"equal": bytes.Equal(in[:], out), "size": int64(len(data)),
		})
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	}
	if ws != nil {
		for _, d := range ws.Denials() {
			rec.denied = append(rec.denied, r.deny(d))
		}
	}
	if len(rec.denied) > 0 {
		rec.status = "denied"
	}
	if err := r.record(rec); err != nil {
		return nil, err
	}
	return r.afterDenial(s, rec.denied), nil
}

// ---- slots ----

// callSlot asks the adapter for a proposal for slot name, verifies it, and
// on acceptance merges it into the adjustable fields. It re-asks with the
// errors up to the slot's limit, then takes the fallback: "keep" goes on
// with the current values, "halt" stops the run.
func (r *runner) callSlot(name, stepID, kind string) (map[string]any, *ledger.Halt, error) {
	slot := r.pkg.Manifest.Slots[name]
	rec, err := r.begin(Step{ID: stepID}, kind)
	if err != nil {
		return nil, nil, err
	}
	proj := map[string]any{}
	for _, ptr := range slot.Projection {
		if v, ok := pointerGet(r.state, ptr); ok {
			proj[ptr] = cloneValue(v)
		}
	}
	projLink, err := r.packet(proj, "projection")
	if err != nil {
		return nil, nil, err
	}
	prompt := r.pkg.Prompts[name]
	promptSum := sha256.Sum256([]byte(prompt))
	adapterName, model := "none", ""
	if r.opts.Adapter != nil {
		adapterName, model = r.opts.Adapter.Name(), r.opts.Adapter.Model()
	}
	if model == "" {
		model = slot.Model
	}
	rec.adapter = adapterName
	var errs []string
	var accepted map[string]any
	timedOut := false // the run's time limit cut the slot's calls short
	for try := 1; try <= slot.Limit && accepted == nil && !timedOut; try++ {
		call := ledger.SlotCall{Type: ledger.TypeSlotCall, Slot: name, Adapter: adapterName, Model: model, Try: int64(try),
			PromptDigest: "sha256:" + hex.EncodeToString(promptSum[:]), Projection: projLink, Errors: []string{}}
		var raw []byte
		if r.opts.Adapter == nil {
			err = errors.New("no adapter configured for slots")
		} else {
			raw, err = r.opts.Adapter.Propose(r.work, SlotRequest{Slot: name, Prompt: prompt, Projection: proj, Schema: r.pkg.AdjustRaw, Try: try, Errors: errs})
		}
		respLink, perr := r.putRaw(raw)
		if perr != nil {
			return nil, nil, perr
		}
		call.Response = respLink
		if err != nil {
			call.Verdict = "error"
			errs = []string{err.Error()}
			// Once the run's time is up every further try fails the same
			// way: the slot ran out of time, no proposal was rejected.
			timedOut = r.work.Err() != nil
		} else if prop, verr := r.verifyProposal(slot, raw); verr != nil {
			call.Verdict = "rejected"
			errs = verr
		} else {
			call.Verdict = "accepted"
			pl, err := r.packet(prop, AdjustSchema)
			if err != nil {
				return nil, nil, err
			}
			call.Proposal = &pl
			accepted = prop
			errs = nil
		}
		call.Errors = append(call.Errors, errs...)
		link, err := r.put(&call)
		if err != nil {
			return nil, nil, err
		}
		rec.slotCalls = append(rec.slotCalls, link)
		r.slotCalls = append(r.slotCalls, link)
	}
	if timedOut {
		if cerr := r.ctx.Err(); cerr != nil {
			return nil, nil, cerr // the caller gave up on the run: no receipt
		}
	}
	var halt *ledger.Halt
	switch {
	case timedOut:
		rec.status = "halted"
		rec.note = "run time limit of " + r.pkg.Manifest.Timeouts.Run + " reached during slot " + name + ": " + strings.Join(errs, "; ")
		halt = &ledger.Halt{Verdict: string(gate.Timeout), Reason: "run time limit of " + r.pkg.Manifest.Timeouts.Run + " reached during slot " + name, RestartPoint: stepID}
	case accepted != nil:
		adj := r.state["adjustable"].(map[string]any)
		for k, v := range accepted {
			adj[k] = v
		}
	case slot.Fallback == "keep":
		rec.status = "fallback"
		rec.note = "no acceptable proposal; kept the current values: " + strings.Join(errs, "; ")
	default:
		rec.status = "halted"
		rec.note = "no acceptable proposal after " + fmt.Sprint(slot.Limit) + " tries: " + strings.Join(errs, "; ")
		halt = &ledger.Halt{Verdict: "REJECTED", Reason: "slot " + name + ": " + rec.note, RestartPoint: stepID}
	}
	if err := r.record(rec); err != nil {
		return nil, nil, err
	}
	return accepted, halt, nil
}

// verifyProposal checks a raw response: one JSON object, only fields the
// adjustable schema declares, valid against it, and the slot verifier's
// own checks. It returns the errors to send back on a re-ask.
func (r *runner) verifyProposal(slot Slot, raw []byte) (map[string]any, []string) {
	// Strictly: a response with a key twice, or a number no value can
	// hold, means two things or nothing, and is refused (encoding/json
	// kept the last of two keys and rounded integers beyond 2^53).
	v, err := cas.DecodePlainJSON(raw)
	if err != nil {
		return nil, []string{fmt.Sprintf("the response is not one valid JSON object (%v): %s", err, firstLine(raw))}
	}
	prop, ok := v.(map[string]any)
	if !ok {
		return nil, []string{"the response must be a JSON object of adjustable fields"}
	}
	var errs []string
	props, _ := r.pkg.AdjustRaw["properties"].(map[string]any)
	var keys []string
	for k := range prop {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := props[k]; !ok {
			errs = append(errs, fmt.Sprintf("field %q is not in the adjustable schema; only %s may be set", k, strings.Join(sortedKeys(props), ", ")))
		}
	}
	if err := validate(r.pkg.Adjustable, prop); err != nil {
		errs = append(errs, "schema: "+err.Error())
	}
	if slot.Verifier != nil {
		for _, field := range slot.Verifier.Files {
			p, _ := prop[field].(string)
			if p == "" {
				continue
			}
			err := r.needWorkspace()
			var ws *workspace.Workspace
			if err == nil {
				ws, err = workspace.Open(r.workspace, r.pkg.Permissions, r.opts.StoreDir)
			}
			if err == nil {
				_, err = ws.ReadFile(p)
				ws.Close()
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("field %q names %q, which is not a readable file: %v", field, p, err))
			}
		}
		for _, bad := range slot.Verifier.Forbid {
			if strings.Contains(string(raw), bad) {
				errs = append(errs, fmt.Sprintf("the proposal contains %q, which the verifier forbids", bad))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cas.FromJSON(prop).(map[string]any), nil
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ---- gates ----

type gateOutcome struct {
	res  gate.Result
	link cas.Link
	read []cas.Link
}

// evaluateGates runs every gate over the evidence this run observed and
// records the verdicts in a transition.
func (r *runner) evaluateGates() ([]gateOutcome, error) {
	rec, err := r.begin(Step{ID: "gates"}, "gates")
	if err != nil {
		return nil, err
	}
	env := gate.Env{Now: r.now(), LastChange: r.lastChange}
	if len(r.vouchings) > 0 {
		// What the command evidence vouches for is judged against the
		// workspace as it is now.
		now, err := r.snapshotWorkspace()
		if err != nil {
			return nil, fmt.Errorf("snapshot workspace for the gates: %w", err)
		}
		r.observed, r.observedSeq = now.Cid, r.seq
		link, err := r.observeOn("gates", ledger.KindWorkspace, "workspace", map[string]any{}, env.Now, &ledger.Vouching{Workspace: now.Cid})
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
		if env.Stale, err = ledger.StaleEvidence(r.ctx, r.st, r.vouchings, now.Cid); err != nil {
			return nil, fmt.Errorf("workspace freshness: %w", err)
		}
	}
	var out []gateOutcome
	for _, g := range r.pkg.Gates {
		res := g.Evaluate(r.evidence, env)
		var read []cas.Link
		for _, ref := range res.Read {
			if c, err := cid.Decode(ref); err == nil {
				read = append(read, cas.Link{Cid: c})
			}
		}
		spec := g.Spec()
		link, err := r.put(&ledger.GateResult{Type: ledger.TypeGate, Gate: res.Gate, Predicate: spec.Predicate, Verdict: string(res.Verdict),
			Action: res.Action, Reason: res.Reason, Read: orEmpty(read), At: ledger.Stamp(env.Now)})
		if err != nil {
			return nil, err
		}
		rec.gates = append(rec.gates, link)
		out = append(out, gateOutcome{res: res, link: link, read: orEmpty(read)})
		if res.Verdict != gate.Pass {
			rec.status = "failed"
		}
	}
	return out, r.record(rec)
}

// firstFailed returns the first gate that did not PASS, preferring one
// whose rule says halt.
func firstFailed(results []gateOutcome) *gateOutcome {
	var first *gateOutcome
	for i := range results {
		o := &results[i]
		if o.res.Verdict == gate.Pass {
			continue
		}
		if o.res.Action == gate.ActionHalt {
			return o
		}
		if first == nil {
			first = o
		}
	}
	return first
}

// failureView is what a repair slot may be shown of the failed gates.
func failureView(results []gateOutcome) []any {
	var out []any
	for _, o := range results {
		if o.res.Verdict == gate.Pass {
			continue
		}
		out = append(out, map[string]any{"gate": o.res.Gate, "verdict": string(o.res.Verdict), "reason": o.res.Reason})
	}
	return out
}

// ---- the receipt ----

// finish builds the receipt from the ledger, signs and stores it. PASS is
// set in one place only: when the final gate evaluation exists and every
// gate in it passed.
func (r *runner) finish(halt *ledger.Halt, results []gateOutcome, ws *cas.Link) (*Result, error) {
	if r.prior == nil {
		// A receipt is the head of a chain; with no step recorded there is
		// nothing to sign for.
		reason := "no step ran"
		if halt != nil {
			reason = halt.Reason
		}
		return nil, fmt.Errorf("haygent: the run ended before its first step: %s", reason)
	}
	rc := &ledger.Receipt{
		Type: ledger.TypeReceipt, Run: r.opts.RunID, Objective: r.pkg.Manifest.Objective,
		Haygent: r.pkg.Manifest.Name + "@" + r.pkg.Manifest.Version,
		Package: cas.Link{Cid: r.pkgCID}, Input: cas.Link{Cid: r.inputCID}, Workspace: ws,
		Permissions: cas.Link{Cid: r.permCID}, Used: sortedTrue(r.used), Denied: r.denied,
		Steps: r.steps, SlotCalls: orEmpty(r.slotCalls), Evidence: orEmpty(r.evLinks), Gates: []cas.Link{},
		Repairs: r.attempt, RepairBudget: int64(r.pkg.Manifest.RepairBudget),
		Limitations: orEmptyS(r.limitations), Head: *r.prior, Transitions: r.transitions,
		Replay: r.opts.Replay, StartedAt: ledger.Stamp(r.started), FinishedAt: ledger.Stamp(r.now()),
	}
	final, err := r.finalWorkspace(ws)
	if err != nil {
		return nil, fmt.Errorf("snapshot the final workspace: %w", err)
	}
	rc.FinalWorkspace = final
	if rc.Denied == nil {
		rc.Denied = []ledger.Denied{}
	}
	for _, o := range results {
		rc.Gates = append(rc.Gates, o.link)
	}
	var paths []string
	for p := range r.artifacts {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		rc.Artifacts = append(rc.Artifacts, r.artifacts[p])
	}
	if rc.Artifacts == nil {
		rc.Artifacts = []ledger.Artifact{}
	}
	if halt == nil && allPassed(results) {
		// pointerSet keeps the output an object; the check here is so a
		// broken state halts the run rather than panicking it.
		output, isObject := r.state["output"].(map[string]any)
		if err := validate(r.pkg.Output, r.state["output"]); err != nil {
			halt = &ledger.Halt{Verdict: string(gate.Invalid), Reason: "output breaks the output contract: " + err.Error(), Attempts: r.attempt, RestartPoint: r.restartPoint()}
		} else if !isObject {
			halt = &ledger.Halt{Verdict: string(gate.Invalid), Reason: "the output is not a JSON object, which an output packet must be", Attempts: r.attempt, RestartPoint: r.restartPoint()}
		} else {
			out, err := r.packet(output, OutputSchema)
			if err != nil {
				return nil, err
			}
			rc.Output = &out
			rc.Status = ledger.StatusPass
		}
	}
	if rc.Status != ledger.StatusPass {
		if halt == nil {
			halt = &ledger.Halt{Verdict: "UNKNOWN", Reason: "the gates did not all pass", Attempts: r.attempt}
		}
		rc.Status = ledger.StatusHalt
		halt.Preserved = rc.Artifacts
		if halt.LastEvidence == nil {
			halt.LastEvidence = lastN(r.evLinks, 3)
		}
		rc.Halt = halt
	}
	data, err := rc.SignEncoded(r.opts.Key, r.opts.Signatures)
	if err != nil {
		return nil, err
	}
	b := cas.NewBlock(cas.DagCBOR, data)
	if err := r.w.Add(r.ctx, b); err != nil {
		return nil, err
	}
	link := cas.Link{Cid: b.CID()}
	// The receipt is the last block; once the flush returns, the whole
	// ledger is stored.
	if err := r.w.Flush(r.ctx); err != nil {
		return nil, err
	}
	return &Result{Receipt: rc, ReceiptCID: link.Cid}, nil
}

func allPassed(results []gateOutcome) bool {
	if len(results) == 0 {
		return false
	}
	for _, o := range results {
		if o.res.Verdict != gate.Pass {
			return false
		}
	}
	return true
}

func lastN(l []cas.Link, n int) []cas.Link {
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return append([]cas.Link{}, l...)
}

func sortedTrue(m map[string]bool) []string {
	out := []string{}
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// needWorkspace makes the empty workspace of a run given none.
func (r *runner) needWorkspace() error {
	if r.workspace != "" {
		return nil
	}
	dir, err := os.MkdirTemp("", "hg-workspace-*")
	if err != nil {
		return err
	}
	r.workspace, r.tempWorkspace = dir, true
	return nil
}

// finalWorkspace is the workspace as the run leaves it, stored as
// snapshotWorkspace stores it: what a Work Order hands on along a
// workspace edge. A run that never had a workspace leaves the one it
// started with (start, the empty tree); a run whose head is an
// evaluation of the gates leaves the workspace that evaluation observed,
// which nothing has changed since; any other run's is stored now.
func (r *runner) finalWorkspace(start *cas.Link) (*cas.Link, error) {
	switch {
	case r.workspace == "":
		return start, nil
	case r.observed.Defined() && r.observedSeq == r.seq-1:
		return &cas.Link{Cid: r.observed}, nil
	}
	return r.snapshotWorkspace()
}

// emptyTree is the block of the empty hg/tree@1: the workspace of a run
// given none.
var emptyTree = func() cas.Block {
	data, err := cas.Marshal(&cas.TreeNode{Type: cas.TypeTree, Entries: []cas.TreeEntry{}})
	if err != nil {
		panic(err)
	}
	return cas.NewBlock(cas.DagCBOR, data)
}()

// EmptyTree is the CID of the empty hg/tree@1, the workspace snapshot of
// a run given no workspace.
func EmptyTree() cid.Cid { return emptyTree.CID() }

// snapshotWorkspace stores what the read grants let the Haygent see of its
// workspace, as a tree. Symlinks are stored as links, never followed. A
// run given no workspace has an empty one. An hg store in the workspace
// is left out, whatever the grants say: a step never sees one, and a
// store holds the runner's signing key.
func (r *runner) snapshotWorkspace() (*cas.Link, error) {
	if r.workspace == "" {
		return &cas.Link{Cid: emptyTree.CID()}, r.w.Add(r.ctx, emptyTree)
	}
	set := r.pkg.Permissions
	fence, err := workspace.NewFence(r.workspace, r.opts.StoreDir)
	if err != nil {
		return nil, err
	}
	c, err := cas.PutTree(r.ctx, r.st, r.workspace, &cas.TreeOptions{
		Skipped: func(string, os.FileMode) {},
		Include: func(p string, isDir bool) bool {
			if fence.Holds(p) {
				return false
			}
			if isDir {
				if !set.MayMatchUnder(perm.VerbRead, p) {
					return false
				}
				// A store reached by another name is still the store.
				fi, err := os.Lstat(filepath.Join(r.workspace, filepath.FromSlash(p)))
				return err != nil || !fence.IsStore(fi)
			}
			return set.Check(perm.Op{Verb: perm.VerbRead, Kind: perm.KindFile, Target: p}).Allowed
		},
	})
	if err != nil {
		return nil, err
	}
	return &cas.Link{Cid: c}, nil
}

// validate checks a JSON-like value against a compiled schema.
func validate(sch *jsonschema.Schema, v any) error {
	if sch == nil {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New(strings.ReplaceAll(fmt.Sprintf("%v", ve), "\n", " "))
		}
		return err
	}
	return nil
}

// adjustableDefaults returns the "default" of every property of the
// adjustable schema: the values the first pass runs with.
func adjustableDefaults(schema map[string]any) map[string]any {
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		if m, ok := p.(map[string]any); ok {
			if d, ok := m["default"]; ok {
				out[name] = cas.FromJSON(cloneValue(d))
			}
		}
	}
	return out
}
