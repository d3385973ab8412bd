package haygent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
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
	} else if r.pkgCID, err = PutPackage(r.ctx, r.st, r.pkg.Dir, r.opts.StoreDir); err != nil {
		return nil, fmt.Errorf("store package: %w", err)
	}
	in, err := r.put(ledger.NewInputPacket(InputSchema, input, r.opts.Upstream))
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
