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
