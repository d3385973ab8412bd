package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/haygent/hg/belief"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpDefaultInline is the largest file get returns unless hg mcp
// --max-inline says otherwise.
const mcpDefaultInline = 1 << 20

// mcpMaxRef bounds a ref, run id or class a client passes.
const mcpMaxRef = 512

type putIn struct {
	Path string `json:"path" jsonschema:"a file or directory under the server's root (relative to it, or absolute inside it)"`
}

type putOut struct {
	CID  string `json:"cid"`
	Kind string `json:"kind" jsonschema:"file or dir"`
	Size uint64 `json:"size"`
}

func (s *mcpServer) put(ctx context.Context, _ *mcp.CallToolRequest, in putIn) (*mcp.CallToolResult, putOut, error) {
	p, err := s.root.resolve(in.Path)
	if err != nil {
		return nil, putOut{}, err
	}
	info, err := os.Stat(p)
	if err != nil {
		return nil, putOut{}, err
	}
	var out putOut
	var tree cid.Cid
	if info.IsDir() {
		// Read through a root opened beneath the server's: a directory
		// on the way swapped for a symlink since the path was resolved
		// leads out of neither.
		if tree, err = s.putDir(ctx, p, false); err != nil {
			return nil, putOut{}, err
		}
	}
	g := s.globals(io.Discard, io.Discard)
	err = g.withStore(false, func(st cas.Store) error {
		switch {
		case info.IsDir():
			in, err := cas.Stat(ctx, st, tree)
			if err != nil {
				return err
			}
			out = putOut{CID: tree.String(), Kind: cas.KindDir, Size: in.Size}
		case info.Mode().IsRegular():
			// Opened through the root, which follows no symlink out of
			// it: a path swapped for one since it was resolved fails.
			f, err := s.root.open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			c, size, err := cas.PutFile(ctx, st, f, nil)
			if err != nil {
				return err
			}
			out = putOut{CID: c.String(), Kind: cas.KindFile, Size: size}
		default:
			return fmt.Errorf("%s is not a regular file or directory", in.Path)
		}
		return nil
	})
	return nil, out, err
}

type getIn struct {
	Ref  string `json:"ref" jsonschema:"a CID, a pin name, or RUN/NODE: the final workspace of a node of a run"`
	Path string `json:"path,omitempty" jsonschema:"a slash-separated path inside the tree ref names"`
}

type getOut struct {
	CID     string      `json:"cid"`
	Kind    string      `json:"kind" jsonschema:"file, dir, symlink or raw"`
	Size    uint64      `json:"size"`
	Text    *string     `json:"text,omitempty" jsonschema:"a file's content, when it is UTF-8"`
	Base64  string      `json:"base64,omitempty" jsonschema:"a file's content, when it is not UTF-8"`
	Target  string      `json:"target,omitempty" jsonschema:"a symlink's target"`
	Entries []treeEntry `json:"entries,omitempty" jsonschema:"a tree's entries"`
	Note    string      `json:"note,omitempty"`
}

type treeEntry struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Mode uint32 `json:"mode"`
	Size uint64 `json:"size"`
	CID  string `json:"cid"`
}

func (s *mcpServer) get(ctx context.Context, _ *mcp.CallToolRequest, in getIn) (*mcp.CallToolResult, getOut, error) {
	if err := checkRef(in.Ref); err != nil {
		return nil, getOut{}, err
	}
	if len(in.Path) > mcpMaxPath {
		return nil, getOut{}, fmt.Errorf("a path of %d bytes: at most %d", len(in.Path), mcpMaxPath)
	}
	var hints bytes.Buffer
	g := s.globals(io.Discard, &hints)
	var (
		out     getOut
		nodeRun string // RUN of RUN/NODE
	)
	err := g.withStore(true, func(st cas.Store) error {
		c, err := resolve(ctx, st, in.Ref)
		if i := strings.LastIndex(in.Ref, "/"); err != nil && i > 0 {
			nodeRun = in.Ref[:i]
			c, err = nodeFinalWorkspace(ctx, g, st, nodeRun, in.Ref[i+1:])
		}
		if err != nil {
			return err
		}
		kind := ""
		if in.Path != "" {
			if c, kind, err = walkTree(ctx, st, c, in.Path); err != nil {
				return err
			}
		}
		out, err = s.read(ctx, st, c, kind)
		return err
	})
	if err == nil && nodeRun != "" {
		// A node's state is the run record's, which only hg's
		// verification of the run says holds: a record forged to say a
		// node is done hands out nothing.
		err = s.checkRunVerifies(ctx, nodeRun)
	}
	if err != nil {
		return nil, getOut{}, err
	}
	if h := strings.TrimSpace(hints.String()); h != "" {
		out.Note = h
	}
	return nil, out, err
}

// checkRunVerifies is nil if hg's verification of run (as asked for,
// not the id its record holds) holds now, else an error naming the
// first check that failed.
func (s *mcpServer) checkRunVerifies(ctx context.Context, run string) error {
	_, rep, err := s.verify(ctx, nil, verifyIn{Ref: run})
	if err != nil {
		return fmt.Errorf("verify %s: %w", run, err)
	}
	if !rep.OK {
		why := "no check passed"
		if f := rep.FirstFailure; f != nil {
			why = f.Check + ": " + f.Detail
			if f.Node != "" {
				why = "node " + f.Node + ": " + why
			}
		}
		return fmt.Errorf("run %s does not verify (%s): none of its workspaces is handed out", run, why)
	}
	return nil
}

// walkTree follows path from the tree c, each step a name of the tree
// before it (no "..", no symlink followed); it returns the entry's link
// and kind.
func walkTree(ctx context.Context, st cas.Store, c cid.Cid, path string) (cid.Cid, string, error) {
	names := strings.Split(strings.Trim(path, "/"), "/")
	for _, name := range names {
		if err := cas.CheckName(name); err != nil {
			return cid.Undef, "", fmt.Errorf("path %q: %w", path, err)
		}
	}
	kind := cas.KindDir
	for _, name := range names {
		if kind != cas.KindDir {
			return cid.Undef, "", fmt.Errorf("path %q: %s is a %s, not a directory", path, name, kind)
		}
		t, err := cas.LoadTree(ctx, st, c)
		if err != nil {
			return cid.Undef, "", err
		}
		found := false
		for _, e := range t.Entries {
			if e.Name == name {
				c, kind, found = e.Link.Cid, e.Kind, true
				break
			}
		}
		if !found {
			return cid.Undef, "", fmt.Errorf("path %q: no entry %q", path, name)
		}
	}
	return c, kind, nil
}

// read returns the file, tree, symlink or raw block c, every block
// verified as it is read; a file over the inline limit is refused.
func (s *mcpServer) read(ctx context.Context, st cas.Store, c cid.Cid, kind string) (getOut, error) {
	out := getOut{CID: c.String()}
	if kind == cas.KindSymlink {
		data, err := st.Get(ctx, c)
		if err != nil {
			return out, err
		}
		out.Kind, out.Target, out.Size = cas.KindSymlink, string(data), uint64(len(data))
		return out, nil
	}
	info, err := cas.Stat(ctx, st, c)
	if err != nil {
		return out, err
	}
	out.Size = info.Size
	switch {
	case info.Type == cas.TypeTree:
		t, err := cas.LoadTree(ctx, st, c)
		if err != nil {
			return out, err
		}
		out.Kind = cas.KindDir
		out.Entries = []treeEntry{}
		for _, e := range t.Entries {
			out.Entries = append(out.Entries, treeEntry{Name: e.Name, Kind: e.Kind, Mode: e.Mode, Size: e.Size, CID: e.Link.Cid.String()})
		}
		return out, nil
	case info.Type == cas.TypeFile, c.Type() == cas.Raw:
		if info.Size > uint64(s.maxInline) {
			return out, fmt.Errorf("%s is %d bytes, over the %d bytes get returns inline (hg mcp --max-inline); read it with 'hg get'", c, info.Size, s.maxInline)
		}
		var buf bytes.Buffer
		if info.Type == cas.TypeFile {
			out.Kind = cas.KindFile
			if _, err := cas.ReadFile(ctx, st, c, &limitWriter{w: &buf, n: s.maxInline}, nil); err != nil {
				return out, err
			}
		} else {
			out.Kind = "raw"
			data, err := st.Get(ctx, c)
			if err != nil {
				return out, err
			}
			buf.Write(data)
		}
		if utf8.Valid(buf.Bytes()) {
			text := buf.String()
			out.Text = &text
		} else {
			out.Base64 = base64.StdEncoding.EncodeToString(buf.Bytes())
		}
		return out, nil
	}
	what := info.Codec
	if info.Type != "" {
		what = info.Type
	}
	return out, fmt.Errorf("%s is a %s block, not a file or tree (the report and verify tools read receipts and runs)", c, what)
}

// limitWriter fails a write past n bytes: a file whose index lies about
// its size cannot grow a reply past the limit.
type limitWriter struct {
	w io.Writer
	n int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errors.New("the file is longer than its index says")
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}

// checkRef checks the form of a ref a client passes: a CID, a pin name,
// a run id, or RUN/NODE.
func checkRef(ref string) error {
	if ref == "" || len(ref) > mcpMaxRef {
		return fmt.Errorf("ref: want a CID, a pin name, a run id or RUN/NODE of at most %d bytes", mcpMaxRef)
	}
	if _, err := cas.ParseCID(ref); err == nil || cas.CheckPinName(ref) == nil {
		return nil
	}
	if run, node, ok := strings.Cut(ref, "/"); ok && cas.CheckPinName(run) == nil && dag.ValidName(node) {
		return nil
	}
	return fmt.Errorf("ref %q: want a CID, a pin name, a run id or RUN/NODE", ref)
}

type planIn struct {
	WorkOrder string `json:"workorder" jsonschema:"the Work Order file, under the server's root"`
}

type planOut struct {
	Name      string        `json:"name"`
	Objective string        `json:"objective"`
	Class     string        `json:"class,omitempty"`
	Waves     [][]string    `json:"waves" jsonschema:"the nodes, in the order they can run"`
	Decisions []decisionOut `json:"decisions"`
	Open      []string      `json:"open" jsonschema:"the decisions submit must be given answers for"`
}

type decisionOut struct {
	Name     string `json:"name"`
	Question string `json:"question"`
	Critical bool   `json:"critical"`
	Allowed  []any  `json:"allowed,omitempty"`
	Schema   any    `json:"schema,omitempty"`
	Bound    bool   `json:"bound"`
	Value    any    `json:"value,omitempty"`
	Source   string `json:"source,omitempty" jsonschema:"belief (the class's belief log) or default"`
	Note     string `json:"note,omitempty"`
}

func (s *mcpServer) plan(ctx context.Context, _ *mcp.CallToolRequest, in planIn) (*mcp.CallToolResult, planOut, error) {
	plan, err := s.loadPlan(in.WorkOrder)
	if err != nil {
		return nil, planOut{}, err
	}
	wo := plan.WorkOrder
	out := planOut{Name: wo.Name, Objective: wo.Objective, Waves: wo.Waves(), Decisions: []decisionOut{}, Open: []string{}}
	if len(wo.Decisions) == 0 {
		return nil, out, nil
	}
	out.Class = wo.Class
	g := s.globals(io.Discard, io.Discard)
	st, err := g.openStore(true, "hg mcp")
	if err != nil {
		return nil, out, err
	}
	log, err := belief.Log(ctx, st, wo.Class)
	st.Close()
	if err != nil {
		return nil, out, err
	}
	all, open := belief.Clarify(wo, belief.Reduce(log))
	schemas := decisionSchemas(plan.File)
	for _, r := range all {
		d := decisionOut{Name: r.Decision.Name, Question: r.Decision.Question, Critical: r.Decision.Critical,
			Allowed: r.Decision.Allowed, Bound: r.Bound, Source: r.Source, Note: r.Note}
		if r.Bound {
			d.Value = r.Value
		}
		d.Schema = schemas[r.Decision.Name]
		out.Decisions = append(out.Decisions, d)
	}
	for _, r := range open {
		out.Open = append(out.Open, r.Decision.Name)
	}
	return nil, out, nil
}

// decisionSchemas returns the schema each decision of the Work Order
// file declares, as written (the plan keeps them compiled only); a file
// that no longer reads gives none.
func decisionSchemas(path string) map[string]any {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var wo struct {
		Decisions map[string]struct {
			Schema any `json:"schema"`
		} `json:"decisions"`
	}
	if json.Unmarshal(data, &wo) != nil {
		return nil
	}
	out := map[string]any{}
	for name, d := range wo.Decisions {
		if d.Schema != nil {
			out[name] = d.Schema
		}
	}
	return out
}

// loadPlan loads a Work Order file a client names, as hg run does,
// after checking that it and every directory it reads lie under the
// root.
func (s *mcpServer) loadPlan(path string) (*mcpPlan, error) {
	p, err := s.root.resolve(path)
	if err != nil {
		return nil, err
	}
	if info, err := os.Stat(p); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a Work Order file", path)
	}
	// The directories it names are checked before scheduler.Load reads
	// them: its errors would say what lies outside the root.
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	wo, err := dag.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.root.confineWorkOrder(wo, filepath.Dir(p)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	plan, err := scheduler.Load(p)
	if err != nil {
		return nil, err
	}
	if err := s.root.confinePlan(plan); err != nil {
		return nil, err
	}
	return &mcpPlan{Plan: plan, File: p}, nil
}

// mcpPlan is a loaded Work Order and the file it was read from.
type mcpPlan struct {
	*scheduler.Plan
	File string
}

type statusIn struct {
	Run         string  `json:"run" jsonschema:"the run id submit returned"`
	WaitSeconds float64 `json:"wait_seconds,omitempty" jsonschema:"wait up to this long (at most 30) for a node's state or the run's status to change"`
}

type statusOut struct {
	Run       string    `json:"run"`
	Status    string    `json:"status" jsonschema:"running, done, halted or cancelled"`
	Reason    string    `json:"reason,omitempty"`
	Executing *bool     `json:"executing,omitempty" jsonschema:"while running: whether a process executes it"`
	Nodes     []mcpNode `json:"nodes"`
	Error     string    `json:"error,omitempty" jsonschema:"why a run this server executes stopped with an error"`
	// Verified is hg's verification of a run that has stopped running,
	// made when status answers: the states above are the run record as
	// stored, which only this says held.
	Verified   *bool  `json:"verified,omitempty" jsonschema:"once the run stopped: whether hg verify holds for it now; the states are the record as stored, believe them only when this is true"`
	Unverified string `json:"unverified,omitempty" jsonschema:"when verified is false: the first check that failed"`
}

// mcpNode is a node's state, as hg status --json prints it.
type mcpNode struct {
	Name        string `json:"name"`
	State       string `json:"state" jsonschema:"pending, ready, active, concluded, done (its receipt accepted), blocked, failed, cancelled..."`
	Attempts    int64  `json:"attempts"`
	Memo        bool   `json:"memo" jsonschema:"its accepted receipt came from the memo cache"`
	Receipt     string `json:"receipt,omitempty"`
	Reason      string `json:"reason,omitempty"`
	BreakerOpen bool   `json:"breaker_open,omitempty"`
}

// mcpMaxWait bounds status's wait_seconds: MCP calls have timeouts.
const mcpMaxWait = 30 * time.Second

func (s *mcpServer) status(ctx context.Context, _ *mcp.CallToolRequest, in statusIn) (*mcp.CallToolResult, statusOut, error) {
	if len(in.Run) > mcpMaxRef || scheduler.CheckRunID(in.Run) != nil {
		return nil, statusOut{}, fmt.Errorf("run %q: want a run id (run-...)", truncate(in.Run))
	}
	if in.WaitSeconds < 0 || in.WaitSeconds > mcpMaxWait.Seconds() {
		return nil, statusOut{}, fmt.Errorf("wait_seconds: want 0 to %.0f", mcpMaxWait.Seconds())
	}
	first, err := s.readStatus(ctx, in.Run)
	if err != nil || in.WaitSeconds == 0 || first.Status != scheduler.StatusRunning {
		return s.verified(ctx, in.Run, first, err)
	}
	deadline := time.Now().Add(time.Duration(in.WaitSeconds * float64(time.Second)))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, first, ctx.Err()
		case <-s.runs.changed(in.Run):
		case <-tick.C:
		}
		now, err := s.readStatus(ctx, in.Run)
		if err != nil || now.Status != first.Status || !sameNodes(now.Nodes, first.Nodes) || time.Now().After(deadline) {
			return s.verified(ctx, in.Run, now, err)
		}
	}
}

// verified adds to the status of run, if it stopped running, whether it
// verifies now: run as asked for, not the id its record holds.
func (s *mcpServer) verified(ctx context.Context, run string, st statusOut, err error) (*mcp.CallToolResult, statusOut, error) {
	if err != nil || st.Status == scheduler.StatusRunning {
		return nil, st, err
	}
	_, rep, err := s.verify(ctx, nil, verifyIn{Ref: run})
	if err != nil {
		return nil, st, fmt.Errorf("verify %s: %w", run, err)
	}
	st.Verified = &rep.OK
	if f := rep.FirstFailure; !rep.OK && f != nil {
		st.Unverified = f.Check + ": " + f.Detail
		if f.Node != "" {
			st.Unverified = "node " + f.Node + ": " + st.Unverified
		}
	}
	return nil, st, nil
}

// readStatus is hg status --json RUN, and what this server knows of the
// run's end.
func (s *mcpServer) readStatus(ctx context.Context, run string) (statusOut, error) {
	data, err := s.cli(ctx, "status", "--json", "--", run)
	if err != nil {
		return statusOut{}, err
	}
	var out statusOut
	if err := json.Unmarshal(data, &out); err != nil {
		return statusOut{}, fmt.Errorf("hg status --json: %w", err)
	}
	if out.Nodes == nil {
		out.Nodes = []mcpNode{}
	}
	if err := s.runs.err(run); err != nil {
		out.Error = err.Error()
	}
	return out, nil
}

func sameNodes(a, b []mcpNode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

type reportIn struct {
	Ref string `json:"ref" jsonschema:"a run id, a receipt CID, a pin, or RUN/NODE"`
}

type reportOut struct {
	Report string `json:"report" jsonschema:"the report as hg report prints it"`
	Error  string `json:"error,omitempty" jsonschema:"for a receipt that does not verify: the first failed check"`
}

func (s *mcpServer) report(ctx context.Context, _ *mcp.CallToolRequest, in reportIn) (*mcp.CallToolResult, reportOut, error) {
	if err := checkRef(in.Ref); err != nil {
		return nil, reportOut{}, err
	}
	data, err := s.cli(ctx, "report", "--", in.Ref)
	var ce *cliError
	if errors.As(err, &ce) && ce.code == exitIntegrity && len(data) > 0 {
		// The report was written, and its status line says NOT VERIFIED.
		return nil, reportOut{Report: string(data), Error: ce.Error()}, nil
	}
	return nil, reportOut{Report: string(data)}, err
}

type verifyIn struct {
	Ref    string `json:"ref,omitempty" jsonschema:"a run id, a receipt CID, a pin, or RUN/NODE; with bundle, a CID the bundle holds (default: every root)"`
	Bundle string `json:"bundle,omitempty" jsonschema:"a bundle file (.car) under the server's root, verified alone, from memory"`
}

func (s *mcpServer) verify(ctx context.Context, _ *mcp.CallToolRequest, in verifyIn) (*mcp.CallToolResult, verifyReport, error) {
	args := []string{"verify", "--json"}
	if in.Bundle != "" {
		p, err := s.root.resolve(in.Bundle)
		if err != nil {
			return nil, verifyReport{}, err
		}
		// A bundle is checked against the keys this store trusts, as
		// a run or receipt in it is: a client adds none.
		keys, err := storeTrust(s.storeDir)
		if err != nil {
			return nil, verifyReport{}, err
		}
		for _, k := range keys {
			args = append(args, "--key", ledger.FormatPublicKey(ed25519.PublicKey(k)))
		}
		args = append(args, "--bundle", p)
	} else if in.Ref == "" {
		return nil, verifyReport{}, errors.New("give ref, or bundle")
	}
	if in.Ref != "" {
		if err := checkRef(in.Ref); err != nil {
			return nil, verifyReport{}, err
		}
		args = append(args, "--", in.Ref)
	}
	data, err := s.cli(ctx, args...)
	var rep verifyReport
	if len(data) > 0 {
		if jerr := json.Unmarshal(data, &rep); jerr != nil {
			return nil, verifyReport{}, fmt.Errorf("hg verify --json: %w", jerr)
		}
		// A failed check is the answer, not an error of the tool: ok
		// is false and first_failure names it.
		var ce *cliError
		if errors.As(err, &ce) && ce.code == exitIntegrity && rep.FirstFailure != nil {
			return nil, rep, nil
		}
	}
	return nil, rep, err
}

type beliefIn struct {
	Class string `json:"class" jsonschema:"a task class (a Work Order's class, or its name)"`
}

type beliefOut struct {
	Class string        `json:"class"`
	Bound []beliefBound `json:"bound" jsonschema:"the decisions the log binds now"`
	Log   []beliefEvent `json:"log" jsonschema:"every event, oldest first"`
}

type beliefBound struct {
	Slot  string `json:"slot"`
	Value any    `json:"value"`
	Event string `json:"event"`
	Cause string `json:"cause"`
}

type beliefEvent struct {
	Event string `json:"event"`
	Slot  string `json:"slot"`
	Op    string `json:"op"`
	Value any    `json:"value"`
	Cause string `json:"cause"`
	Why   string `json:"why,omitempty"`
	At    string `json:"at"`
}

func (s *mcpServer) belief(ctx context.Context, _ *mcp.CallToolRequest, in beliefIn) (*mcp.CallToolResult, beliefOut, error) {
	if len(in.Class) > mcpMaxRef {
		return nil, beliefOut{}, fmt.Errorf("class: at most %d bytes", mcpMaxRef)
	}
	log, err := readLog(ctx, s.globals(io.Discard, io.Discard), in.Class)
	if err != nil {
		return nil, beliefOut{}, err
	}
	out := beliefOut{Class: in.Class, Bound: []beliefBound{}, Log: []beliefEvent{}}
	state := belief.Reduce(log)
	for _, e := range log {
		out.Log = append(out.Log, beliefEvent{Event: e.CID.String(), Slot: e.Slot, Op: e.Op, Value: jsonValue(e.Value),
			Cause: e.Cause.String(), Why: e.Why, At: e.At})
		if b, ok := state[e.Slot]; ok && b.Event.CID == e.CID {
			out.Bound = append(out.Bound, beliefBound{Slot: e.Slot, Value: jsonValue(b.Value), Event: e.CID.String(), Cause: e.Cause.String()})
		}
	}
	return nil, out, nil
}

// jsonValue is a data-model value as plain JSON (a link as {"/": CID}).
func jsonValue(v any) any {
	data, err := cas.EncodeJSON(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return nil
	}
	return out
}
