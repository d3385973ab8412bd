package haygent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"text/template"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/workspace"
)

// builtinOp is one kind of builtin step: what the package's lint knows of
// it and what runs it.
type builtinOp struct {
	name string
	// files says the op reads or writes workspace files: the step opens
	// the workspace under the package's permissions (making an empty one
	// for a run given none) before the op runs.
	files bool
	// writes names the argument that holds the workspace file the op
	// writes, for an op that writes one (the lint refuses a report file
	// such an op can write).
	writes string
	// run does the op. It marks the step failed through the call (a
	// failure the run records and goes on from); an error is for a run
	// that cannot go on (the store failed).
	run func(c *builtinCall) error
}

// builtinOps are the steps that need no process, in the order the lint
// names them. It is the only list of them: the lint (checkSpine) and the
// runtime (builtinStep) both read it, and nothing changes it.
var builtinOps = []builtinOp{
	{name: "noop", run: func(*builtinCall) error { return nil }},
	{name: "copy_field", run: (*builtinCall).copyField},
	{name: "digest", files: true, run: (*builtinCall).digest},
	{name: "digest_equal", run: (*builtinCall).digestEqual},
	{name: "write_file", files: true, writes: "path", run: (*builtinCall).writeFile},
	{name: "read_file", files: true, run: (*builtinCall).readFile},
	{name: "roundtrip", files: true, run: (*builtinCall).roundtrip},
	{name: "approval", run: (*builtinCall).approval},
}

// builtinOpNamed returns the builtin op called name.
func builtinOpNamed(name string) (builtinOp, bool) {
	for _, op := range builtinOps {
		if op.name == name {
			return op, true
		}
	}
	return builtinOp{}, false
}

// builtinOpNames lists the builtin ops, in the table's order.
func builtinOpNames() []string {
	names := make([]string, len(builtinOps))
	for i, op := range builtinOps {
		names[i] = op.name
	}
	return names
}

// builtinCall is one builtin step running: the step, the record it
// leaves, and the workspace if its op touches files.
type builtinCall struct {
	r   *runner
	s   Step
	rec *stepRecord
	ws  *workspace.Workspace
}

// str is the string argument k of the step, or "".
func (c *builtinCall) str(k string) string { v, _ := c.s.Args[k].(string); return v }

// fail marks the step failed and says why.
func (c *builtinCall) fail(format string, args ...any) {
	c.rec.status = ledger.StepFailed
	c.rec.note = fmt.Sprintf(format, args...)
}

// read reads the workspace file p and marks it used; if it cannot, it
// fails the step and returns false.
func (c *builtinCall) read(p string) ([]byte, bool) {
	data, err := c.ws.ReadFile(p)
	if err != nil {
		c.fail("%s: %v", c.s.Op, err)
		return nil, false
	}
	c.r.used["read:file:"+p] = true
	return data, true
}

// keep adds the evidence just stored to the step's record.
func (c *builtinCall) keep(link cas.Link, err error) error {
	if err != nil {
		return err
	}
	c.rec.evidence = append(c.rec.evidence, link)
	return nil
}

func (r *runner) builtinStep(s Step) (*ledger.Halt, error) {
	rec, err := r.begin(s, StepBuiltin)
	if err != nil {
		return nil, err
	}
	c := &builtinCall{r: r, s: s, rec: &rec}
	// Load refuses a step whose op is not in the table.
	op, _ := builtinOpNamed(s.Op)
	if op.files {
		if err := r.needWorkspace(); err != nil {
			return nil, err
		}
		if c.ws, err = workspace.Open(r.workspace, r.pkg.Permissions, r.opts.StoreDir); err != nil {
			return nil, err
		}
		defer c.ws.Close()
	}
	if op.run != nil {
		if err := op.run(c); err != nil {
			return nil, err
		}
	}
	if c.ws != nil {
		for _, d := range c.ws.Denials() {
			rec.denied = append(rec.denied, r.deny(d))
		}
	}
	if len(rec.denied) > 0 {
		rec.status = ledger.StepDenied
	}
	if err := r.record(rec); err != nil {
		return nil, err
	}
	return r.afterDenial(s, rec.denied), nil
}

func (c *builtinCall) copyField() error {
	v, ok := pointerGet(c.r.state, c.str("from"))
	if !ok {
		c.fail("copy_field: nothing at %s", c.str("from"))
		return nil
	}
	if err := pointerSet(c.r.state, c.str("to"), cloneValue(v)); err != nil {
		c.fail("copy_field: %v", err)
	}
	return nil
}

func (c *builtinCall) digest() error {
	var content []byte
	subject := "field:" + c.str("from")
	if p := c.str("file"); p != "" {
		subject = "file:" + p
		data, ok := c.read(p)
		if !ok {
			return nil
		}
		content = data
	} else {
		v, ok := pointerGet(c.r.state, c.str("from"))
		if !ok {
			c.fail("digest: nothing at %s", c.str("from"))
			return nil
		}
		content, _ = json.Marshal(v)
	}
	sum := sha256.Sum256(content)
	return c.keep(c.r.observe(c.s.ID, evidence.KindDigest, subject, map[string]any{"sha256": hex.EncodeToString(sum[:]), "size": int64(len(content))}))
}

// approval checks an approval from the state against the subject the step
// sees now, at the instant of use.
func (c *builtinCall) approval() error {
	v, ok := pointerGet(c.r.state, c.str("from"))
	if !ok {
		c.fail("approval: nothing at %s", c.str("from"))
		return nil
	}
	a, err := ledger.ApprovalFromValue(v)
	if err != nil {
		c.fail("approval at %s: %v", c.str("from"), err)
		return nil
	}
	subject, _ := pointerGet(c.r.state, c.str("subject"))
	observed, now := ledger.SubjectDigest(subject), c.r.now()
	problem := ledger.CheckApproval(a, observed, now, c.r.pkg.Manifest.Approvers)
	return c.keep(c.r.observeAt(c.s.ID, evidence.KindApproval, "step:"+c.s.ID, ledger.ApprovalData(a, observed, problem), now))
}

func (c *builtinCall) digestEqual() error {
	a, okA := pointerGet(c.r.state, c.str("a"))
	b, okB := pointerGet(c.r.state, c.str("b"))
	da, db := ledger.SubjectDigest(a), ledger.SubjectDigest(b)
	return c.keep(c.r.observe(c.s.ID, evidence.KindDigest, "step:"+c.s.ID, map[string]any{
		"a": da, "b": db, "equal": okA && okB && da == db,
	}))
}

func (c *builtinCall) writeFile() error {
	p := c.str("path")
	var content []byte
	if tmpl := c.str("template"); tmpl != "" {
		t, err := template.New(c.s.ID).Option("missingkey=error").Parse(tmpl)
		if err != nil {
			c.fail("write_file: template: %v", err)
			return nil
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, c.r.state); err != nil {
			c.fail("write_file: template: %v", err)
			return nil
		}
		content = buf.Bytes()
	} else {
		v, ok := pointerGet(c.r.state, c.str("from"))
		s, isStr := v.(string)
		if !ok || !isStr {
			c.fail("write_file: no string at %s", c.str("from"))
			return nil
		}
		content = []byte(s)
	}
	beforeSum := ""
	if old, err := c.ws.ReadFile(p); err == nil {
		sum := sha256.Sum256(old)
		beforeSum = hex.EncodeToString(sum[:])
	}
	if err := c.ws.WriteFile(p, content, 0o644); err != nil {
		c.fail("write_file: %v", err)
		return nil
	}
	sum := sha256.Sum256(content)
	return c.keep(c.r.mutation(c.s.ID, p, beforeSum, hex.EncodeToString(sum[:])))
}

func (c *builtinCall) readFile() error {
	p := c.str("path")
	if from := c.str("path_from"); from != "" {
		v, _ := pointerGet(c.r.state, from)
		p, _ = v.(string)
	}
	data, ok := c.read(p)
	if !ok {
		return nil
	}
	sum := sha256.Sum256(data)
	if err := c.keep(c.r.observe(c.s.ID, evidence.KindRead, "file:"+p, map[string]any{"path": p, "sha256": hex.EncodeToString(sum[:]), "size": int64(len(data))})); err != nil {
		return err
	}
	if to := c.str("to"); to != "" {
		if err := pointerSet(c.r.state, to, string(data)); err != nil {
			c.fail("read_file: %v", err)
		}
	}
	return nil
}

func (c *builtinCall) roundtrip() error {
	p := c.str("path")
	data, ok := c.read(p)
	if !ok {
		return nil
	}
	in := sha256.Sum256(data)
	f, _, err := cas.PutFile(c.r.ctx, c.r.st, bytes.NewReader(data), nil)
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := cas.ReadFile(c.r.ctx, c.r.st, f, h, nil); err != nil {
		return err
	}
	out := h.Sum(nil)
	return c.keep(c.r.observe(c.s.ID, evidence.KindDigest, "file:"+p, map[string]any{
		"input": hex.EncodeToString(in[:]), "output": hex.EncodeToString(out), "file": f.String(),
		"equal": bytes.Equal(in[:], out), "size": int64(len(data)),
	}))
}
