package replay

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/workspace"
	"github.com/ipfs/go-cid"
)

// ErrIncomplete is wrapped when a block that a receipt reaches (its package
// tree, a transition, a packet, evidence, a slot call or its response) is
// missing: the ledger cannot be replayed, and that is a finding about the
// store, not about the work.
var ErrIncomplete = errors.New("ledger incomplete")

// Where a replay's workspace came from ([Result].Workspace).
const (
	WorkspaceSnapshot = "snapshot" // the receipt's workspace tree, read from the store
	WorkspaceDir      = "dir"      // a copy of Options.Workspace
	WorkspaceEmpty    = "empty"    // an empty directory: the snapshot is not in the store
)

// Options configure a replay. The zero value replays from the store
// alone.
type Options struct {
	// Workspace, if set, is a directory the replay starts from instead of
	// the receipt's workspace snapshot. It is copied first and never
	// modified. Empty means the snapshot, or an empty directory when the
	// snapshot is not in the store (the result says which).
	Workspace string
	// StoreDir is the directory of the hg store the replay reads, as in
	// [Options]: if it lies inside Workspace, the copy leaves it out, as
	// it leaves out every directory named .haygent there, and the replay
	// fences the same path of its copy, as the run fenced the store.
	StoreDir string
	// CacheDir and AllowUnisolated are passed to the run, as in [Options].
	CacheDir        string
	AllowUnisolated bool
	// Now is the replay's clock. Nil means the recorded start of the run
	// plus the time elapsed since the replay started, so that what the
	// runtime decides by the clock (evidence ages, approval expiry) is
	// decided as of the original run.
	Now func() time.Time
	// Log, if set, is told of each replayed step, as [Options].Log.
	Log func(format string, args ...any)
}

// Result is the comparison of a recorded invocation with its replay.
type Result struct {
	Receipt       cid.Cid // the recorded receipt
	Run           string
	Haygent       string  // name@version
	Workspace     string  // WorkspaceSnapshot, WorkspaceDir or WorkspaceEmpty
	WorkspaceTree cid.Cid // the recorded workspace snapshot, if the receipt has one

	Recorded, Replayed int // transitions in each ledger
	Agree              int // positions whose work identities are equal
	// Divergence is the first difference, or nil when the replay agrees.
	Divergence *Divergence
	// Notes say what a reader of the agreement needs to know: where the
	// workspace came from, slot calls the ledger could not answer.
	Notes []string
}

// Total is the number of transitions compared: the longer ledger's.
func (r *Result) Total() int { return max(r.Recorded, r.Replayed) }

// OK reports whether every transition and the receipt agree.
func (r *Result) OK() bool { return r != nil && r.Divergence == nil }

// Divergence is where a replay first differs from the ledger.
type Divergence struct {
	// Seq is the transition's place in the chain (from 0); -1 means the
	// receipt itself (its input, workspace, status or output).
	Seq     int64  `json:"seq"`
	Step    string `json:"step"`
	Kind    string `json:"kind"`
	Attempt int64  `json:"attempt"`
	// Field names what differs: "input packet", "output packet",
	// "evidence #0 data", "slot call #1 proposal", "status", ...
	Field    string `json:"field"`
	Recorded string `json:"recorded"` // a CID, or the value
	Replayed string `json:"replayed"`
}

func (d *Divergence) String() string {
	where := "receipt"
	if d.Seq >= 0 {
		where = fmt.Sprintf("seq %d (step %s, %s, attempt %d)", d.Seq, d.Step, d.Kind, d.Attempt)
	}
	return fmt.Sprintf("%s: %s: recorded %s, replayed %s", where, d.Field, d.Recorded, d.Replayed)
}

// Replay re-executes the invocation whose receipt is c in a scratch store
// in memory, answering its slots with the responses recorded in the ledger,
// and compares the two ledgers transition by transition (see docs/verification.md,
// "Replay", for exactly what is compared). st is only read. A replay that
// diverges is a result, not an error; err is for a replay that could not be
// carried out: a receipt that is not there, a block it reaches that is
// missing ([ErrIncomplete]) or damaged, a step that could not run.
func Run(ctx context.Context, st cas.Store, c cid.Cid, opts Options) (*Result, error) {
	p, err := Prepare(ctx, st, c, opts)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	return p.Run(ctx)
}

// Replayer is a replay read from the store and ready to run: the package,
// the workspace and the recorded responses are on hand, so the store may be
// closed before [Replayer.Run]. Close removes its temporary files.
type Replayer struct {
	receipt  cid.Cid
	rc       *ledger.Receipt
	opts     Options
	pkg      *haygent.Package
	scratch  *memstore.Store
	tmp      string
	wsDir    string
	storeDir string // in wsDir, where the store was in the workspace copied, if it was
	input    map[string]any
	upstream []cid.Cid
	calls    []recordedCall
	recorded [][]workField
	upNote   string // the recorded halt of an upstream re-check (older runtimes), if any
	res      Result
	ran      bool
}

// Prepare reads everything a replay of receipt c needs from st.
func Prepare(ctx context.Context, st cas.Store, c cid.Cid, opts Options) (_ *Replayer, err error) {
	rc, err := ledger.LoadReceipt(ctx, st, c)
	if err != nil {
		return nil, err
	}
	incomplete := func(what string, err error) error {
		if errors.Is(err, cas.ErrNotFound) {
			return fmt.Errorf("receipt %s: %s: %w: %w", c, what, ErrIncomplete, err)
		}
		return fmt.Errorf("receipt %s: %s: %w", c, what, err)
	}
	p := &Replayer{receipt: c, rc: rc, opts: opts, scratch: memstore.New()}
	p.res = Result{Receipt: c, Run: rc.Run, Haygent: rc.Haygent}
	if p.tmp, err = os.MkdirTemp("", "hg-replay-*"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()

	// The package: its blocks go to the scratch store (the run finds its
	// code version there), and a copy on disk is loaded from them.
	var blocks []cas.Block
	err = cas.Walk(ctx, st, []cid.Cid{rc.Package.Cid}, nil, func(c cid.Cid, data []byte) error {
		b, err := cas.NewBlockWithCID(c, bytes.Clone(data))
		blocks = append(blocks, b)
		return err
	})
	if err == nil {
		err = p.scratch.Put(ctx, blocks...)
	}
	if err != nil {
		return nil, incomplete("package "+rc.Package.String(), err)
	}
	pkgDir := filepath.Join(p.tmp, "package")
	if err := cas.GetTree(ctx, p.scratch, rc.Package.Cid, pkgDir, nil); err != nil {
		return nil, incomplete("package "+rc.Package.String(), err)
	}
	if p.pkg, err = haygent.Load(pkgDir); err != nil {
		return nil, fmt.Errorf("receipt %s: package %s: %w", c, rc.Package, err)
	}

	var in ledger.Packet
	if err := ledger.LoadTyped(ctx, st, rc.Input.Cid, &in); err != nil {
		return nil, incomplete("input packet", err)
	}
	if in.Payload, err = ledger.InlinePayload(ctx, st, in.Payload); err != nil {
		return nil, incomplete("input packet", err)
	}
	p.input = in.Payload
	if p.input == nil {
		p.input = map[string]any{}
	}
	for _, u := range in.Upstream {
		p.upstream = append(p.upstream, u.Cid)
	}

	if err := p.prepareWorkspace(ctx, st); err != nil {
		return nil, err
	}

	l, err := ledger.LoadLedger(ctx, st, c)
	if err != nil {
		return nil, incomplete("ledger", err)
	}
	if p.recorded, err = ledgerWork(ctx, st, l); err != nil {
		return nil, incomplete("ledger", err)
	}
	if p.calls, err = recordedCalls(ctx, st, l); err != nil {
		return nil, incomplete("slot responses", err)
	}
	if len(l.Transitions) > 0 && l.Transitions[0].Kind == "upstream" {
		p.upNote = l.Transitions[0].Note
	}
	return p, nil
}

// prepareWorkspace makes the directory the replay starts from.
func (p *Replayer) prepareWorkspace(ctx context.Context, st cas.Store) error {
	p.wsDir = filepath.Join(p.tmp, "workspace")
	if p.rc.Workspace != nil {
		p.res.WorkspaceTree = p.rc.Workspace.Cid
	}
	if p.opts.Workspace != "" {
		// Through a tree in memory: symlinks stay links, modes are kept,
		// and the caller's directory is never written.
		info, err := os.Stat(p.opts.Workspace)
		if err != nil || !info.IsDir() {
			return fmt.Errorf("workspace %s: not a directory", p.opts.Workspace)
		}
		fence, err := workspace.NewFence(p.opts.Workspace, p.opts.StoreDir)
		if err != nil {
			return fmt.Errorf("workspace %s: %w", p.opts.Workspace, err)
		}
		if s := fence.Stores(); len(s) > 0 {
			p.storeDir = filepath.Join(p.wsDir, filepath.FromSlash(s[0]))
		}
		tmp := memstore.New()
		t, err := cas.PutTree(ctx, tmp, p.opts.Workspace, &cas.TreeOptions{
			Skipped: func(string, os.FileMode) {},
			// Never a store: the run would not see it, and its keys
			// have no business in a scratch directory.
			Include: func(rel string, isDir bool) bool {
				if fence.Holds(rel) {
					return false
				}
				if !isDir {
					return true
				}
				fi, err := os.Lstat(filepath.Join(p.opts.Workspace, filepath.FromSlash(rel)))
				return err != nil || !fence.IsStore(fi)
			},
		})
		if err == nil {
			err = cas.GetTree(ctx, tmp, t, p.wsDir, nil)
		}
		if err != nil {
			return fmt.Errorf("workspace %s: %w", p.opts.Workspace, err)
		}
		p.res.Workspace = WorkspaceDir
		p.res.Notes = append(p.res.Notes, "workspace: a copy of "+p.opts.Workspace+" (given), not the recorded snapshot")
		return nil
	}
	if p.rc.Workspace != nil {
		err := cas.GetTree(ctx, st, p.rc.Workspace.Cid, p.wsDir, nil)
		if err == nil {
			p.res.Workspace = WorkspaceSnapshot
			return nil
		}
		if !errors.Is(err, cas.ErrNotFound) {
			return fmt.Errorf("receipt %s: workspace snapshot %s: %w", p.receipt, p.rc.Workspace, err)
		}
		p.res.Notes = append(p.res.Notes, "workspace: the recorded snapshot "+p.rc.Workspace.String()+
			" is not in the store; replayed in an empty directory (give the original with --workspace DIR)")
	} else {
		p.res.Notes = append(p.res.Notes, "workspace: the receipt records none; replayed in an empty directory")
	}
	p.res.Workspace = WorkspaceEmpty
	return os.Mkdir(p.wsDir, 0o700)
}

// Close removes the replay's temporary files. It is safe to call twice.
func (p *Replayer) Close() error {
	if p.tmp == "" {
		return nil
	}
	err := os.RemoveAll(p.tmp)
	p.tmp = ""
	return err
}

// Run replays the invocation and compares it with the ledger. It may be
// called once.
func (p *Replayer) Run(ctx context.Context) (*Result, error) {
	if p.ran || p.tmp == "" {
		return nil, errors.New("haygent: a Replayer runs once, before Close")
	}
	p.ran = true
	if p.upNote != "" {
		// Runtimes before the scheduler's acceptance took it over re-checked
		// upstream receipts themselves, and such a ledger records the halt;
		// this runtime makes no such check, so there is nothing to replay.
		return &Result{
			Receipt: p.receipt, Run: p.rc.Run, Haygent: p.rc.Haygent, Recorded: len(p.recorded),
			Divergence: &Divergence{Seq: 0, Step: "upstream", Kind: "upstream", Field: "upstream re-check",
				Recorded: p.upNote, Replayed: "none: the runtime no longer re-checks upstream receipts (a Work Order's acceptance does)"},
		}, nil
	}
	_, key, err := ed25519.GenerateKey(rand.Reader) // the scratch ledger's signature means nothing
	if err != nil {
		return nil, err
	}
	now := p.opts.Now
	if now == nil {
		start, perr := time.Parse(time.RFC3339Nano, p.rc.StartedAt)
		if perr != nil {
			start = time.Now()
		}
		began := time.Now()
		now = func() time.Time { return start.Add(time.Since(began)) }
	}
	adapter := &ledgerAdapter{calls: p.calls}
	opts := haygent.Options{
		Store: p.scratch, Key: key, Adapter: adapter, Workspace: p.wsDir, StoreDir: p.storeDir,
		CacheDir: p.opts.CacheDir, AllowUnisolated: p.opts.AllowUnisolated,
		Now: now, RunID: p.rc.Run, Replay: p.rc.Replay, Log: p.opts.Log,
		PackageCID: p.rc.Package.Cid, Upstream: p.upstream,
	}
	out, err := haygent.Run(ctx, p.pkg, p.input, opts)
	if err != nil {
		return nil, fmt.Errorf("replay of %s: %w", p.receipt, err)
	}
	l, err := ledger.LoadLedger(ctx, p.scratch, out.ReceiptCID)
	if err != nil {
		return nil, fmt.Errorf("replay of %s: %w", p.receipt, err)
	}
	replayed, err := ledgerWork(ctx, p.scratch, l)
	if err != nil {
		return nil, fmt.Errorf("replay of %s: %w", p.receipt, err)
	}
	res := p.res
	res.Recorded, res.Replayed = len(p.recorded), len(replayed)
	var first *Divergence
	for i := range res.Total() {
		var d *Divergence
		switch {
		case i >= len(replayed):
			d = fieldDivergence(int64(i), p.recorded[i], workField{"transition", describe(p.recorded[i])})
		case i >= len(p.recorded):
			d = fieldDivergence(int64(i), replayed[i], workField{"transition", "none"})
			d.Replayed = describe(replayed[i])
		default:
			d = compareWork(int64(i), p.recorded[i], replayed[i])
		}
		if d == nil {
			res.Agree++
		} else if first == nil {
			first = d
		}
	}
	if d := p.compareReceipt(ctx, out.Receipt); d != nil && (first == nil || d.Field == "input packet" || d.Field == "workspace") {
		// The start of the work (its input, its workspace) explains what
		// follows; its end (status, output) only repeats it.
		first = d
	}
	if adapter.problem != "" {
		res.Notes = append(res.Notes, "slot calls: "+adapter.problem)
	} else if left := len(adapter.calls) - adapter.next; left > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("slot calls: %d recorded response(s) never asked for", left))
		if first == nil {
			first = &Divergence{Seq: -1, Step: "receipt", Field: "slot calls",
				Recorded: strconv.Itoa(len(adapter.calls)), Replayed: strconv.Itoa(adapter.next)}
		}
	}
	res.Divergence = first
	return &res, nil
}

// compareReceipt compares what a receipt says beyond its transitions: the
// start of the work and its end.
func (p *Replayer) compareReceipt(ctx context.Context, got *ledger.Receipt) *Divergence {
	want := p.rc
	diff := func(field, a, b string) *Divergence {
		if a == b {
			return nil
		}
		return &Divergence{Seq: -1, Step: "receipt", Field: field, Recorded: a, Replayed: b}
	}
	link := func(l *cas.Link) string {
		if l == nil {
			return "none"
		}
		return l.String()
	}
	halt := func(h *ledger.Halt) string {
		if h == nil {
			return "none"
		}
		return h.FailedGate + " " + h.Verdict + " at " + h.RestartPoint
	}
	for _, d := range []*Divergence{
		diff("input packet", want.Input.String(), got.Input.String()),
		diff("workspace", link(want.Workspace), link(got.Workspace)),
		diff("status", want.Status, got.Status),
		diff("output packet", link(want.Output), link(got.Output)),
		diff("halt", halt(want.Halt), halt(got.Halt)),
		diff("repairs", strconv.FormatInt(want.Repairs, 10), strconv.FormatInt(got.Repairs, 10)),
	} {
		if d != nil {
			return d
		}
	}
	return nil
}

// ---- the work identity of a transition ----

// workField is one compared field of a transition's work identity.
type workField struct{ name, value string }

// volatileData lists, per evidence kind, the data fields that record the
// moment or the environment rather than the work: never compared. An
// exit's stdout and stderr are the process's own text (go test -json
// stamps every line; error messages name scratch directories); what the
// work made of them is compared as test_report evidence. An approval's
// reason names the instant of use; its verdict ("valid") is compared.
var volatileData = map[string][]string{
	"exit":     {"duration_ms", "stdout", "stderr"},
	"approval": {"reason"},
}

// volatileState lists the places in the run state that hold time stamps
// or evidence CIDs (which hold time stamps): gate reasons.
var volatileState = [][]string{{"failures", "*", "reason"}}

// ledgerWork returns the work identity of every transition of a ledger.
func ledgerWork(ctx context.Context, st cas.Store, l *ledger.Ledger) ([][]workField, error) {
	evIndex := map[cid.Cid]int{}
	for _, t := range l.Transitions {
		for _, e := range t.Evidence {
			if _, ok := evIndex[e.Cid]; !ok {
				evIndex[e.Cid] = len(evIndex)
			}
		}
	}
	out := make([][]workField, 0, len(l.Transitions))
	for _, t := range l.Transitions {
		w, err := transitionWork(ctx, st, l, t, evIndex)
		if err != nil {
			return nil, fmt.Errorf("transition %d: %w", t.Seq, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func transitionWork(ctx context.Context, st cas.Store, l *ledger.Ledger, t *ledger.Transition, evIndex map[cid.Cid]int) ([]workField, error) {
	var w []workField
	add := func(name, value string) { w = append(w, workField{name, value}) }
	add("seq", strconv.FormatInt(t.Seq, 10))
	add("step", t.Step)
	add("kind", t.Kind)
	add("attempt", strconv.FormatInt(t.Attempt, 10))
	add("package", t.Package.String())
	add("permissions", t.Permissions.String())
	in, err := packetWork(ctx, st, t.Input.Cid)
	if err != nil {
		return nil, err
	}
	add("input packet", in)

	add("slot calls", strconv.Itoa(len(t.SlotCalls)))
	for i, s := range t.SlotCalls {
		sc := l.SlotCalls[s.Cid]
		n := fmt.Sprintf("slot call #%d ", i)
		proj, err := packetWork(ctx, st, sc.Projection.Cid)
		if err != nil {
			return nil, err
		}
		proposal := "none"
		if sc.Proposal != nil {
			proposal = sc.Proposal.String()
		}
		add(n+"slot", sc.Slot)
		add(n+"try", strconv.FormatInt(sc.Try, 10))
		add(n+"prompt", sc.PromptDigest)
		add(n+"projection", proj)
		add(n+"response", sc.Response.String())
		add(n+"verdict", sc.Verdict)
		add(n+"errors", quoteList(sc.Errors))
		add(n+"proposal", proposal)
	}

	add("evidence", strconv.Itoa(len(t.Evidence)))
	for i, e := range t.Evidence {
		ev := l.Evidence[e.Cid]
		data := ev.Data
		if drop := volatileData[ev.Kind]; len(drop) > 0 {
			data = maps.Clone(data)
			for _, k := range drop {
				delete(data, k)
			}
		}
		enc, err := cas.Marshal(data)
		if err != nil {
			return nil, fmt.Errorf("evidence %s: %w", e, err)
		}
		n := fmt.Sprintf("evidence #%d ", i)
		add(n+"kind", ev.Kind)
		add(n+"subject", ev.Subject)
		add(n+"data", cas.Sum(cas.DagCBOR, enc).String())
	}

	add("gates", strconv.Itoa(len(t.Gates)))
	for i, g := range t.Gates {
		gr := l.Gates[g.Cid]
		var read []string
		for _, r := range gr.Read {
			if k, ok := evIndex[r.Cid]; ok {
				read = append(read, "evidence "+strconv.Itoa(k))
			} else {
				read = append(read, r.String()) // outside this ledger: compared as is
			}
		}
		n := fmt.Sprintf("gate #%d ", i)
		add(n+"id", gr.Gate)
		add(n+"verdict", gr.Verdict)
		add(n+"action", gr.Action)
		add(n+"read", "["+strings.Join(read, ", ")+"]")
	}

	var denied []string
	for _, d := range t.Denied {
		denied = append(denied, d.Verb+":"+d.Kind+":"+d.Target+" by "+d.Rule)
	}
	add("denied", quoteList(denied))
	add("status", t.Status)
	out, err := packetWork(ctx, st, t.Output.Cid)
	if err != nil {
		return nil, err
	}
	add("output packet", out)
	return w, nil
}

// packetWork returns the CID of the time-free form of a packet: the packet
// itself unless it is a run state or a projection of one that holds gate
// reasons, which are left out.
func packetWork(ctx context.Context, st cas.Store, c cid.Cid) (string, error) {
	var p ledger.Packet
	if err := ledger.LoadTyped(ctx, st, c, &p); err != nil {
		return "", err
	}
	if outlinedVolatile(&p) {
		// What is left out may sit in a value stored apart: the form is
		// then that of the payload read back whole.
		var err error
		if p.Payload, err = ledger.InlinePayload(ctx, st, p.Payload); err != nil {
			return "", err
		}
	}
	changed := false
	switch p.Schema {
	case "": // the run state
		var v any
		v, changed = stripVolatile(p.Payload, nil)
		p.Payload, _ = v.(map[string]any)
	case "projection": // pointer -> value
		payload := map[string]any{}
		for ptr, v := range p.Payload {
			var path []string
			if ptr != "" {
				var err error
				if path, err = haygent.SplitPointer(ptr); err != nil {
					payload[ptr] = v
					continue
				}
			}
			if slices.ContainsFunc(volatileState, func(pat []string) bool { return matchPath(pat, path) }) {
				changed = true
				continue
			}
			nv, ch := stripVolatile(v, path)
			payload[ptr], changed = nv, changed || ch
		}
		p.Payload = payload
	}
	if !changed {
		return c.String(), nil
	}
	data, err := cas.Marshal(&p)
	if err != nil {
		return "", err
	}
	return cas.Sum(cas.DagCBOR, data).String(), nil
}

// matchPath reports whether path matches pat, "*" matching any element.
func matchPath(pat, path []string) bool {
	if len(pat) != len(path) {
		return false
	}
	for i := range pat {
		if pat[i] != "*" && pat[i] != path[i] {
			return false
		}
	}
	return true
}

// stripVolatile returns v, found at path in the run state, without the
// places volatileState names. It copies only what it changes.
func stripVolatile(v any, path []string) (any, bool) {
	changed := false
	for _, pat := range volatileState {
		if len(path) < len(pat) && matchPath(pat[:len(path)], path) {
			var ch bool
			v, ch = stripRest(v, pat[len(path):])
			changed = changed || ch
		}
	}
	return v, changed
}

// stripRest removes the place rest (not empty) names below v.
func stripRest(v any, rest []string) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if len(rest) == 1 {
			if _, ok := x[rest[0]]; !ok {
				return v, false
			}
			m := maps.Clone(x)
			delete(m, rest[0])
			return m, true
		}
		var out map[string]any
		for k, e := range x {
			if rest[0] != "*" && rest[0] != k {
				continue
			}
			if ne, ch := stripRest(e, rest[1:]); ch {
				if out == nil {
					out = maps.Clone(x)
				}
				out[k] = ne
			}
		}
		if out != nil {
			return out, true
		}
	case []any:
		if len(rest) == 1 {
			return v, false
		}
		var out []any
		for i, e := range x {
			if rest[0] != "*" && rest[0] != strconv.Itoa(i) {
				continue
			}
			if ne, ch := stripRest(e, rest[1:]); ch {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = ne
			}
		}
		if out != nil {
			return out, true
		}
	}
	return v, false
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// compareWork returns the first field where two transitions differ.
func compareWork(seq int64, want, got []workField) *Divergence {
	for i := range min(len(want), len(got)) {
		if want[i].name != got[i].name || want[i].value != got[i].value {
			d := fieldDivergence(seq, want, want[i])
			d.Replayed = got[i].value
			if want[i].name != got[i].name {
				d.Replayed = got[i].name + " " + got[i].value
			}
			return d
		}
	}
	if len(want) != len(got) {
		return fieldDivergence(seq, want, workField{"transition", "longer than its replay"})
	}
	return nil
}

// fieldDivergence is a divergence at field f of the transition w, with
// f's value as recorded; Replayed is the caller's to fill.
func fieldDivergence(seq int64, w []workField, f workField) *Divergence {
	d := &Divergence{Seq: seq, Field: f.name, Recorded: f.value, Replayed: "none"}
	for _, x := range w {
		switch x.name {
		case "step":
			d.Step = x.value
		case "kind":
			d.Kind = x.value
		case "attempt":
			d.Attempt, _ = strconv.ParseInt(x.value, 10, 64)
		}
	}
	return d
}

// describe names a transition in a divergence: "step check (builtin)".
func describe(w []workField) string {
	var step, kind string
	for _, x := range w {
		switch x.name {
		case "step":
			step = x.value
		case "kind":
			kind = x.value
		}
	}
	return "step " + step + " (" + kind + ")"
}

// ---- slot responses from the ledger ----

// recordedCall is one slot call as the ledger holds it: what was asked and
// what came back.
type recordedCall struct {
	slot     string
	try      int64
	response []byte
	err      string // the adapter's error, for a call whose verdict is "error"
}

// recordedCalls reads every slot call of a ledger in order, with its raw
// response.
func recordedCalls(ctx context.Context, st cas.Store, l *ledger.Ledger) ([]recordedCall, error) {
	var out []recordedCall
	for _, t := range l.Transitions {
		for _, s := range t.SlotCalls {
			sc := l.SlotCalls[s.Cid]
			rc := recordedCall{slot: sc.Slot, try: sc.Try}
			var err error
			if sc.Response.Cid.Type() == cas.Raw {
				rc.response, err = st.Get(ctx, sc.Response.Cid)
			} else { // a response over one chunk is stored as a file
				var buf bytes.Buffer
				_, err = cas.ReadFile(ctx, st, sc.Response.Cid, &buf, nil)
				rc.response = buf.Bytes()
			}
			if err != nil {
				return nil, fmt.Errorf("slot call %s: response: %w", s, err)
			}
			if sc.Verdict == ledger.SlotError {
				rc.err = "error"
				if len(sc.Errors) > 0 {
					rc.err = sc.Errors[0]
				}
			}
			out = append(out, rc)
		}
	}
	return out, nil
}

// ledgerAdapter answers slots with the recorded calls, strictly in order:
// a request for another slot or try than the next recorded one, or one
// past the last, is refused (and noted), never answered out of order.
type ledgerAdapter struct {
	mu      sync.Mutex
	calls   []recordedCall
	next    int
	problem string // the first request the ledger could not answer
}

func (a *ledgerAdapter) Name() string  { return "script" }
func (a *ledgerAdapter) Model() string { return "" }

func (a *ledgerAdapter) Propose(_ context.Context, req haygent.SlotRequest) ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var err error
	switch {
	case a.next >= len(a.calls):
		err = fmt.Errorf("replay: the ledger records %d slot call(s), and the replay asks for another: slot %q try %d", len(a.calls), req.Slot, req.Try)
	case a.calls[a.next].slot != req.Slot || a.calls[a.next].try != int64(req.Try):
		c := a.calls[a.next]
		err = fmt.Errorf("replay: the ledger's slot call %d is slot %q try %d, the replay asks for slot %q try %d", a.next, c.slot, c.try, req.Slot, req.Try)
	}
	if err != nil {
		if a.problem == "" {
			a.problem = err.Error()
		}
		return nil, err
	}
	c := a.calls[a.next]
	a.next++
	if c.err != "" {
		return c.response, errors.New(c.err)
	}
	return c.response, nil
}
