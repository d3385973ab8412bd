package metrics

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// Options choose what [Compute] counts. The zero value counts every run
// and trusts no key (so that no receipt verifies).
type Options struct {
	// Since leaves out the runs started before it; zero counts every run.
	Since time.Time
	// Trusted are the keys whose signatures a receipt may carry: the
	// store's runner key and the keys it trusts, as hg verify takes them.
	Trusted []ed25519.PublicKey
	// Cache is what the verifications of earlier attempts share; nil is
	// a new one for this call.
	Cache *verify.Cache
}

// CheckRecheckLog names a run's recheck log that cannot be read, in
// [RunCounts].Unverified.
const CheckRecheckLog = "recheck log"

// Not measured, and why: when no run counted holds the record a rate is
// computed from.
var (
	noRecheck = NotMeasured{Metric: "false_pass_rate", Reason: "no hg recheck of the counted runs is recorded: false_pass has nothing to be a rate of"}
	noReplay  = NotMeasured{Metric: "replay_agreement", Reason: "no hg recheck --replay of the counted runs is recorded (hg replay alone records nothing)"}
)

// fact is what the counted runs say of one receipt.
type fact struct {
	receipt cid.Cid
	obj     *ledger.Receipt // as the verifier decoded it; nil if it could not
	pkg     cid.Cid         // the package the Work Order names for its node
	ok      bool            // every verification of it held
	failed  string          // the first check that failed, if one did
	// regressed is the check of the first regressed event that names
	// it, in a run whose own checks hold.
	regressed  string
	acceptedAt time.Time // its acceptance, when a run accepted it
	// rechecked: a recorded re-measurement measured it; replayed: one
	// replayed it, and diverged: one of those replays did not agree.
	rechecked, replayed, diverged bool
	// held: a sound run stands behind it, a done node's receipt whose
	// every check holds; withdrawn: a sound run's node holding it was
	// withdrawn.
	held, withdrawn bool
	// classes are the classes of the runs that count it: true where one
	// of the class stands behind it.
	classes map[string]bool
}

// observe adds one verification of the receipt.
func (f *fact) observe(checks []verify.Check, obj *ledger.Receipt) {
	if f.obj == nil {
		f.obj = obj
	}
	if len(checks) == 0 {
		f.ok = false
		if f.failed == "" {
			f.failed = "not verified"
		}
		return
	}
	for _, c := range checks {
		if !c.OK {
			f.ok = false
			if f.failed == "" {
				f.failed = checkName(c.Name)
			}
			return
		}
	}
}

// checkName is the name a failed check is counted under: every gate's
// check is "gate ID"; counted as one.
func checkName(name string) string {
	if strings.HasPrefix(name, verify.CheckGatePrefix) {
		return "gates"
	}
	return name
}

// computation is one call of [Compute] in progress.
type computation struct {
	ctx     context.Context
	st      cas.Store
	opts    Options
	facts   map[cid.Cid]*fact
	classes map[string]*classAcc
	report  *Report
}

// acc is one group's metrics with the durations not yet summarised.
type acc struct {
	m          Metrics
	toVerified []time.Duration
}

type classAcc struct {
	g       ClassGroup
	runTime []time.Duration
}

// Compute reads every run of st started on or after opts.Since, verifies
// every receipt the runs hold (each node's current receipt with the run,
// as scheduler.VerifyRun does, and the receipts of earlier attempts on
// their own), and returns the metrics. A run whose record cannot be read
// is named in the report, not an error; err is for a store that fails to
// answer, or ctx's.
func Compute(ctx context.Context, st cas.Store, opts Options) (*Report, error) {
	if opts.Cache == nil {
		opts.Cache = verify.NewCache()
	}
	c := &computation{ctx: ctx, st: st, opts: opts, facts: map[cid.Cid]*fact{}, classes: map[string]*classAcc{},
		report: &Report{Trusted: len(opts.Trusted), NotMeasured: []NotMeasured{}}}
	r := c.report
	r.Runs.Unreadable, r.Runs.Unverified = []RunProblem{}, []RunProblem{}
	if !opts.Since.IsZero() {
		r.Since = opts.Since.Format(time.RFC3339)
	}
	runs, err := scheduler.ListRuns(ctx, st)
	if err != nil {
		return nil, err
	}
	r.Runs.Listed = len(runs)
	for i := range runs {
		info := &runs[i]
		switch start := info.StartedAt(); {
		case info.Err != nil:
			r.Runs.Unreadable = append(r.Runs.Unreadable, RunProblem{Run: info.Run, Check: scheduler.CheckRecord, Detail: info.Err.Error()})
			continue
		case opts.Since.IsZero():
		case start.IsZero():
			r.Runs.NoStart++
			continue
		case start.Before(opts.Since):
			r.Runs.BeforeSince++
			continue
		}
		if err := c.run(info); err != nil {
			return nil, err
		}
	}
	c.aggregate()
	return r, nil
}

// run counts one run.
func (c *computation) run(info *scheduler.RunInfo) error {
	v, err := scheduler.VerifyRun(c.ctx, c.st, info.Record, c.opts.Trusted, nil)
	if err != nil {
		return fmt.Errorf("run %s: %w", info.Run, err)
	}
	for _, rc := range v.Checks {
		if !rc.OK && (rc.Name == scheduler.CheckRecord || rc.Name == scheduler.CheckWorkOrder) {
			c.report.Runs.Unreadable = append(c.report.Runs.Unreadable, RunProblem{Run: info.Run, Check: rc.Name, Detail: rc.Detail})
			return nil
		}
	}
	rec, err := scheduler.LoadRecordAt(c.ctx, c.st, info.Record)
	if err != nil {
		return fmt.Errorf("run %s: %w", info.Run, err)
	}
	obj, _, err := scheduler.LoadWorkOrder(c.ctx, c.st, rec)
	if err != nil {
		return fmt.Errorf("run %s: %w", info.Run, err)
	}
	c.report.Runs.Counted++
	// sound: the run's own checks hold and every receipt it holds is its
	// node's work, so what its unsigned record says counts: its states,
	// events and withdrawals.
	sound := true
	for _, rc := range v.Checks {
		if !rc.OK {
			sound = false
			c.report.Runs.Unverified = append(c.report.Runs.Unverified, RunProblem{Run: info.Run, Check: rc.Name, Detail: rc.Detail})
			break
		}
	}
	class := rec.Class
	if class == "" {
		class = rec.Name
	}
	ca := c.classes[class]
	if ca == nil {
		ca = &classAcc{g: ClassGroup{Class: class}}
		c.classes[class] = ca
	}
	ca.g.Runs++

	packages := map[string]cid.Cid{}
	for _, on := range obj.Nodes {
		packages[on.Name] = on.Haygent.Cid
	}
	byNode := map[string]*scheduler.NodeVerification{}
	for i := range v.Nodes {
		byNode[v.Nodes[i].Node] = &v.Nodes[i]
	}
	// The receipts each node's regressed events name: its accepted work
	// once, memo hits among them.
	regressed := map[string]map[cid.Cid]bool{}
	for _, ev := range rec.Events {
		if ev.Kind == scheduler.EventRegressed && ev.Receipt != nil {
			if regressed[ev.Node] == nil {
				regressed[ev.Node] = map[cid.Cid]bool{}
			}
			regressed[ev.Node][ev.Receipt.Cid] = true
		}
	}
	notWorkOf := func(n, rc, as, check, why string) {
		sound = false
		c.report.Runs.Unverified = append(c.report.Runs.Unverified, RunProblem{Run: info.Run, Check: check,
			Detail: fmt.Sprintf("node %s holds receipt %s as %s, but %s: not its work, not counted", n, rc, as, why)})
	}
	timed := true // every acceptance of a done node says when
	var lastAccepted time.Time
	var held, withdrawn []*fact
	own := map[cid.Cid]bool{} // the run's receipts, current and earlier
	for _, n := range rec.Nodes {
		nv := byNode[n.Name]
		if nv == nil || (n.Receipt == nil) != !nv.Receipt.Defined() || (n.Receipt != nil && n.Receipt.Cid != nv.Receipt) {
			return fmt.Errorf("run %s: node %s: the verification does not match the record", info.Run, n.Name)
		}
		nodeOK := len(nv.Checks) > 0
		for _, ch := range nv.Checks {
			nodeOK = nodeOK && ch.OK
		}
		if n.Receipt != nil {
			var obj *ledger.Receipt
			if nv.Verification != nil {
				obj = nv.Verification.Object
			}
			placed := n.State == dag.Done && nodeOK // the verifier placed it
			t, why := tieOf(obj, packages[n.Name], rec.Run, n.Name, n.Memo || regressed[n.Name][n.Receipt.Cid])
			refused := false // the scheduler refused it, as no work of the node
			if !placed && t != nodesWork && n.State != dag.Done {
				if refused, err = c.rejected(n.Acceptance, n.Receipt.Cid); err != nil {
					return fmt.Errorf("run %s: node %s: %w", info.Run, n.Name, err)
				}
			}
			switch {
			case placed || t == nodesWork:
				own[n.Receipt.Cid] = true
				f := c.fact(n.Receipt.Cid, packages[n.Name], class)
				f.observe(nv.Checks, obj)
				if n.State == dag.Deleted {
					withdrawn = append(withdrawn, f)
				}
				if !placed {
					break
				}
				held = append(held, f)
				// The acceptance is read only where the verification
				// found it links this receipt, accepted.
				at, err := c.acceptedAt(n.Acceptance.Cid, n.Receipt.Cid)
				if err != nil {
					return fmt.Errorf("run %s: node %s: %w", info.Run, n.Name, err)
				}
				if !at.IsZero() && (f.acceptedAt.IsZero() || at.Before(f.acceptedAt)) {
					f.acceptedAt = at
				}
				if at.IsZero() {
					timed = false
				} else if at.After(lastAccepted) {
					lastAccepted = at
				}
			case refused:
				// Not counted, as in no run.
			case t == otherRuns:
				// Only a memo hit's receipt is another run's.
				notWorkOf(n.Name, n.Receipt.Cid.String(), "its receipt", scheduler.CheckPlace,
					fmt.Sprintf("it is of run %q, not %q, and the record marks no memo hit", obj.Run, scheduler.NodeRunID(rec.Run, n.Name)))
			case t == notWork:
				notWorkOf(n.Name, n.Receipt.Cid.String(), "its receipt", scheduler.CheckPlace, why)
			}
		}
		for _, e := range n.Earlier {
			t, why, err := c.earlier(e.Cid, packages[n.Name], class, rec.Run, n.Name, regressed[n.Name][e.Cid])
			if err != nil {
				return fmt.Errorf("run %s: node %s: %w", info.Run, n.Name, err)
			}
			switch t {
			case nodesWork:
				own[e.Cid] = true
			case notWork:
				notWorkOf(n.Name, e.Cid.String(), "an earlier attempt", scheduler.CheckEarlier, why)
			}
		}
	}
	if sound {
		// A receipt counts as a PASS only where a sound run stands behind
		// it, and no withdrawal by one took it back.
		for _, f := range held {
			f.held, f.classes[class] = true, true
		}
		for _, f := range withdrawn {
			f.withdrawn = true
		}
		for _, ev := range rec.Events {
			if ev.Kind != scheduler.EventRegressed || ev.Receipt == nil {
				continue
			}
			f := c.facts[ev.Receipt.Cid]
			if f == nil || !own[ev.Receipt.Cid] {
				// The events check does not tie the receipt to the node:
				// an event that names another is not counted.
				c.report.Runs.Unverified = append(c.report.Runs.Unverified, RunProblem{Run: info.Run, Check: scheduler.CheckEvents,
					Detail: fmt.Sprintf("a regressed event of node %s names receipt %s, which the run does not hold: not counted", ev.Node, ev.Receipt.Cid)})
				continue
			}
			if f.regressed == "" {
				f.regressed = ev.Check
			}
			f.rechecked = true
			if ev.Check == scheduler.CheckReplay {
				f.replayed, f.diverged = true, true
			}
		}
		if err := c.rechecks(info.Run, own); err != nil {
			return err
		}
	}
	// A status counts only where the verifier establishes it: done when
	// every check of the run holds, any other when the run is sound.
	done := rec.Status == scheduler.StatusDone && sound && v.OK()
	switch {
	case done:
		ca.g.Done++
	case !sound || rec.Status == scheduler.StatusDone:
		ca.g.RunsUnverified++
	case rec.Status == scheduler.StatusHalted:
		ca.g.Halted++
	case rec.Status == scheduler.StatusCancelled:
		ca.g.Cancelled++
	case rec.Status == scheduler.StatusRunning:
		ca.g.Running++
	default:
		ca.g.RunsUnverified++
	}
	if start := info.StartedAt(); done && timed && !start.IsZero() && !lastAccepted.IsZero() {
		ca.runTime = append(ca.runTime, max(lastAccepted.Sub(start), 0))
	}
	return nil
}

// rechecks counts the recorded re-measurements of a run whose own checks
// hold: each entry names one of the run's receipts (any other is not
// counted).
func (c *computation) rechecks(run string, own map[cid.Cid]bool) error {
	log, err := scheduler.Rechecks(c.ctx, c.st, run)
	switch {
	case errors.Is(err, cas.ErrInvalid), errors.Is(err, cas.ErrNotCanonical), errors.Is(err, cas.ErrCorrupt), errors.Is(err, cas.ErrNotFound):
		// What the log says is not counted; the run is named.
		c.report.Runs.Unverified = append(c.report.Runs.Unverified, RunProblem{Run: run, Check: CheckRecheckLog, Detail: err.Error()})
		return nil
	case err != nil:
		return fmt.Errorf("run %s: %w", run, err)
	}
	for _, r := range log {
		for _, e := range r.Nodes {
			f := c.facts[e.Receipt.Cid]
			if f == nil || !own[e.Receipt.Cid] || (e.Result != scheduler.RecheckHolds && e.Result != scheduler.RecheckRegressed) {
				continue
			}
			f.rechecked = true
			if e.Replay != nil {
				f.replayed = true
				f.diverged = f.diverged || e.Replay.Diverged
			}
		}
	}
	return nil
}

// fact returns the fact of receipt rc, made on first sight.
func (c *computation) fact(rc, pkg cid.Cid, class string) *fact {
	f := c.facts[rc]
	if f == nil {
		f = &fact{receipt: rc, pkg: pkg, ok: true, classes: map[string]bool{}}
		c.facts[rc] = f
	}
	if _, ok := f.classes[class]; !ok {
		f.classes[class] = false
	}
	return f
}

// earlier verifies a receipt of an earlier attempt of node of run on its
// own (the run no longer holds it as the node's, so only its own checks
// apply), and counts it if it is the node's work (named: a regressed
// event of the node names it).
func (c *computation) earlier(rc, pkg cid.Cid, class, run, node string, named bool) (t tie, why string, err error) {
	v, err := verify.VerifyReceiptKnown(c.ctx, c.st, rc, c.opts.Trusted, nil, c.opts.Cache)
	if err != nil {
		return 0, "", err
	}
	if t, why = tieOf(v.Object, pkg, run, node, named); t == nodesWork {
		c.fact(rc, pkg, class).observe(v.Checks, v.Object)
	}
	return t, why, nil
}

// acceptedAt reads the time of the acceptance a, which VerifyRun found
// links rc with the verdict accepted. The zero time is an acceptance
// that does not say when, in RFC 3339.
func (c *computation) acceptedAt(a, rc cid.Cid) (time.Time, error) {
	var acc scheduler.Acceptance
	if err := c.st.View(c.ctx, a, func(d []byte) error { return cas.Unmarshal(d, &acc) }); err != nil {
		return time.Time{}, fmt.Errorf("acceptance %s: %w", a, err)
	}
	if acc.Receipt.Cid != rc || acc.Verdict != scheduler.Accepted {
		return time.Time{}, nil
	}
	return parseStamp(acc.At), nil
}

// rejected says whether the acceptance a (nil: none) rejects receipt rc:
// the scheduler refused it, as no work of the node. One that cannot be
// read rejects nothing; err is for a store that fails to answer.
func (c *computation) rejected(a *cas.Link, rc cid.Cid) (bool, error) {
	if a == nil {
		return false, nil
	}
	var acc scheduler.Acceptance
	switch err := c.st.View(c.ctx, a.Cid, func(d []byte) error { return cas.Unmarshal(d, &acc) }); {
	case errors.Is(err, cas.ErrInvalid), errors.Is(err, cas.ErrNotCanonical), errors.Is(err, cas.ErrCorrupt), errors.Is(err, cas.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("acceptance %s: %w", a.Cid, err)
	}
	return acc.Type == scheduler.TypeAcceptance && acc.Receipt.Cid == rc && acc.Verdict == scheduler.Rejected, nil
}

func parseStamp(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// aggregate counts every fact into the total and its groups, and fills
// the report's lists in order.
func (c *computation) aggregate() {
	total := &acc{}
	haygents := map[[2]string]*acc{}
	classes := map[string]*acc{}
	for _, ca := range c.classes {
		classes[ca.g.Class] = &acc{}
	}
	order := make([]*fact, 0, len(c.facts))
	for _, f := range c.facts {
		order = append(order, f)
	}
	sort.Slice(order, func(i, j int) bool { return order[i].receipt.KeyString() < order[j].receipt.KeyString() })
	for _, f := range order {
		key := [2]string{"", f.pkg.String()}
		if f.obj != nil {
			key = [2]string{f.obj.Haygent, f.obj.Package.Cid.String()}
		}
		h := haygents[key]
		if h == nil {
			h = &acc{}
			haygents[key] = h
		}
		total.add(f, f.held)
		h.add(f, f.held)
		for class, held := range f.classes {
			classes[class].add(f, held)
		}
	}
	r := c.report
	r.Total = total.metrics()
	if r.Total.Rechecked == 0 {
		r.NotMeasured = append(r.NotMeasured, noRecheck)
	}
	if r.Total.Replayed == 0 {
		r.NotMeasured = append(r.NotMeasured, noReplay)
	}
	r.Haygents = []HaygentGroup{}
	for key, h := range haygents {
		r.Haygents = append(r.Haygents, HaygentGroup{Haygent: key[0], Package: key[1], Metrics: h.metrics()})
	}
	sort.Slice(r.Haygents, func(i, j int) bool {
		a, b := r.Haygents[i], r.Haygents[j]
		if a.Haygent != b.Haygent {
			return a.Haygent < b.Haygent
		}
		return a.Package < b.Package
	})
	r.Classes = []ClassGroup{}
	for class, ca := range c.classes {
		g := ca.g
		g.RunToVerified = summarise(ca.runTime)
		g.Metrics = classes[class].metrics()
		r.Classes = append(r.Classes, g)
	}
	sort.Slice(r.Classes, func(i, j int) bool { return r.Classes[i].Class < r.Classes[j].Class })
}

// add counts one receipt; held is whether a run of the group stands
// behind it.
func (a *acc) add(f *fact, held bool) {
	m := &a.m
	m.Receipts++
	if f.rechecked {
		m.Rechecked++
	}
	if f.replayed {
		m.Replayed++
		if !f.diverged {
			m.ReplayAgreed++
		}
	}
	switch f.regressed {
	case "":
	case scheduler.CheckReplay:
		m.ReplayDiverged++
	case verify.CheckTrust:
		m.TrustWithdrawn++
	default:
		m.FalsePass++
	}
	r := f.obj
	if !f.ok || r == nil {
		m.Unverified++
		if m.UnverifiedBy == nil {
			m.UnverifiedBy = map[string]int{}
		}
		why := f.failed
		if why == "" {
			why = "not verified"
		}
		m.UnverifiedBy[why]++
		return
	}
	m.Verified++
	if len(r.Denied) > 0 {
		m.Denied += len(r.Denied)
		m.DeniedReceipts++
	}
	switch r.Status {
	case ledger.StatusPass:
		switch {
		case f.regressed != "":
			return // verified, but a re-measurement took it back
		case f.withdrawn:
			m.Withdrawn++
			return
		case !held:
			m.PassNotHeld++
			return
		}
		m.Pass++
		m.Repair.RepairsInPass += r.Repairs
		if r.Repairs == 0 {
			m.Repair.FirstTry++
		} else {
			m.Repair.AfterRepair++
		}
		if start := parseStamp(r.StartedAt); !start.IsZero() && !f.acceptedAt.IsZero() {
			if d := f.acceptedAt.Sub(start); d >= 0 {
				a.toVerified = append(a.toVerified, d)
			} else {
				m.ClockSkew++
			}
		}
	case ledger.StatusHalt:
		m.Halt++
		h := r.Halt
		if h == nil { // the status check requires one
			return
		}
		q := &m.HaltInfo
		q.Halts++
		gate, ev, rp := h.FailedGate != "", len(h.LastEvidence) > 0, h.RestartPoint != ""
		q.Gate += b2i(gate)
		q.Evidence += b2i(ev)
		q.RestartPoint += b2i(rp)
		q.Complete += b2i(gate && ev && rp)
		if h.Verdict == ledger.HaltDenied {
			m.HaltsOnDenial++
		}
		if gate && r.RepairBudget > 0 && r.Repairs >= r.RepairBudget {
			m.Repair.BudgetExhausted++
		}
	}
}

func (a *acc) metrics() Metrics {
	m := a.m
	if m.UnverifiedBy == nil {
		m.UnverifiedBy = map[string]int{}
	}
	if m.Pass > 0 {
		per := float64(m.Repair.RepairsInPass) / float64(m.Pass)
		m.Repair.PerPass = &per
	}
	m.ToVerified = summarise(a.toVerified)
	m.FalsePassRate = ratio(m.FalsePass, m.Rechecked)
	m.ReplayAgreement = ratio(m.ReplayAgreed, m.Replayed)
	return m
}

// ratio is n/d, nil when d is 0.
func ratio(n, d int) *float64 {
	if d == 0 {
		return nil
	}
	r := float64(n) / float64(d)
	return &r
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
