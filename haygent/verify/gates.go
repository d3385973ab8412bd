package verify

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/gate"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/ipfs/go-cid"
)

// evaluation is what one gates transition's verdicts are recomputed from.
type evaluation struct {
	node       *ledger.ChainNode
	evidence   []gate.Evidence
	lastChange map[string]time.Time
	stale      map[string]string // evidence ref -> why its workspace changed
	unusable   []string          // why the recomputation cannot be trusted
	final      bool
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
