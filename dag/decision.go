package dag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/haygent/hg/cas"
)

// Decision is a decision slot of a Work Order: a question whose answer
// decides the work, asked before anything runs unless the belief log of
// the order's task class already holds it, and put into the inputs of the
// nodes it reaches.
type Decision struct {
	Name     string
	Question string
	// Allowed lists the values an answer may take (data-model values, as
	// cas.DecodeJSON gives them); empty when any value is allowed.
	Allowed []any
	// Schema is a JSON Schema (2020-12) an answer must satisfy, or nil.
	Schema *jsonschema.Schema
	// Critical decisions must be bound before anything runs; the others
	// take Default when nothing binds them (or stay out of the inputs
	// when there is no default).
	Critical   bool
	Default    any
	HasDefault bool
	Into       []Target // where the value goes
}

// Target is a place in a node's input: Pointer, a JSON Pointer, names
// the member the value is set as; its parent must be an object of the
// input.
type Target struct {
	Node, Pointer string
}

// Check reports why v is not an answer the decision allows, or nil. No
// answer may hold an object shaped like a reference ({"from", "pointer"}):
// in an input it would be read as one.
func (d *Decision) Check(v any) error {
	if hasRef(v) {
		return fmt.Errorf("%s holds an object shaped like a reference ({\"from\", \"pointer\"}), which an input would read as one", FormatValue(v))
	}
	if len(d.Allowed) > 0 && !slices.ContainsFunc(d.Allowed, func(a any) bool { return SameValue(a, v) }) {
		return fmt.Errorf("%s is not one of %s", FormatValue(v), FormatValues(d.Allowed))
	}
	if d.Schema != nil {
		doc, err := schemaValue(v)
		if err != nil {
			return err
		}
		if err := d.Schema.Validate(doc); err != nil {
			return fmt.Errorf("%s does not satisfy the decision's schema: %v", FormatValue(v), err)
		}
	}
	return nil
}

// hasRef reports whether v holds a map shaped like a reference.
func hasRef(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		if isRefShape(x) {
			return true
		}
		for _, e := range x {
			if hasRef(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if hasRef(e) {
				return true
			}
		}
	}
	return false
}

// SameValue reports whether two data-model values are equal, as their
// canonical encodings are.
func SameValue(a, b any) bool {
	ea, err1 := cas.EncodeNode(a)
	eb, err2 := cas.EncodeNode(b)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

// schemaValue turns a data-model value into what the schema validator
// reads.
func schemaValue(v any) (any, error) {
	data, err := cas.EncodeJSON(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}

// FormatValue writes a data-model value as compact JSON, for messages.
func FormatValue(v any) string {
	data, err := cas.EncodeJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// FormatValues writes values as "a, b or c".
func FormatValues(vs []any) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = FormatValue(v)
	}
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// DecisionList returns the Work Order's decision slots in name order.
func (w *WorkOrder) DecisionList() []*Decision {
	out := make([]*Decision, 0, len(w.Decisions))
	for _, name := range sortedKeys(w.Decisions) {
		out = append(out, w.Decisions[name])
	}
	return out
}

// Bind puts the value of each decision in values into the inputs of the
// nodes it reaches. A decision absent from values is left out.
func (w *WorkOrder) Bind(values map[string]any) error {
	for _, d := range w.DecisionList() {
		v, ok := values[d.Name]
		if !ok {
			continue
		}
		for _, t := range d.Into {
			n := w.Nodes[t.Node]
			if n == nil {
				return fmt.Errorf("decision %q: no node %q", d.Name, t.Node)
			}
			in := n.Input()
			if err := setAt(in, t.Pointer, v); err != nil {
				return fmt.Errorf("decision %q: node %q: input%s: %w", d.Name, t.Node, t.Pointer, err)
			}
			if err := n.SetInput(in); err != nil {
				return err
			}
		}
	}
	return nil
}

// setAt sets the member that pointer names in doc to v.
func setAt(doc map[string]any, pointer string, v any) error {
	tokens, err := splitPointer(pointer)
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		return fmt.Errorf("the pointer names the whole input")
	}
	var parent any = doc
	for _, tok := range tokens[:len(tokens)-1] {
		m, ok := parent.(map[string]any)
		if !ok || isRefShape(m) {
			return fmt.Errorf("%q: not inside an object of the input", tok)
		}
		if parent, ok = m[tok]; !ok {
			return fmt.Errorf("no member %q", tok)
		}
	}
	m, ok := parent.(map[string]any)
	if !ok || isRefShape(m) {
		return fmt.Errorf("the parent of %q is not an object of the input (a reference is not one)", tokens[len(tokens)-1])
	}
	m[tokens[len(tokens)-1]] = cas.FromJSON(v)
	return nil
}

// splitPointer splits a JSON Pointer into its unescaped tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON Pointer %q must start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
	}
	return parts, nil
}

// decisions parses the "decisions" object.
func (p *parser) decisions(raw json.RawMessage) map[string]*Decision {
	obj, ok := p.object("", "decisions", raw)
	if !ok {
		return nil
	}
	out := map[string]*Decision{}
	for _, name := range sortedKeys(obj) {
		field := "decisions/" + escapeToken(name)
		if !ValidName(name) {
			p.add("", field, "invalid decision name: %s", nameRule)
			continue
		}
		m, ok := p.object("", field, obj[name])
		if !ok {
			continue
		}
		p.unknown(field+"/", m, "question", "allowed", "schema", "critical", "default", "into")
		d := &Decision{Name: name}
		if raw, ok := m["question"]; !ok {
			p.add("", field+"/question", "required")
		} else if s, ok := p.str("", field+"/question", raw); ok {
			if strings.TrimSpace(s) == "" {
				p.add("", field+"/question", "must not be empty")
			}
			d.Question = s
		}
		if raw, ok := m["allowed"]; ok {
			v, err := cas.DecodeJSON(raw)
			list, isList := v.([]any)
			switch {
			case err != nil:
				p.add("", field+"/allowed", "%v", err)
			case !isList || len(list) == 0:
				p.add("", field+"/allowed", "want a non-empty array of values")
			default:
				d.Allowed = list
			}
		}
		if raw, ok := m["schema"]; ok {
			if kindOf(raw) != kindObject {
				p.add("", field+"/schema", "want an object (a JSON Schema)")
			} else if sch, err := compileDecisionSchema(name, raw); err != nil {
				p.add("", field+"/schema", "%v", err)
			} else {
				d.Schema = sch
			}
		}
		if raw, ok := m["critical"]; ok {
			if err := json.Unmarshal(raw, &d.Critical); err != nil {
				p.add("", field+"/critical", "want true or false")
			}
		}
		if raw, ok := m["default"]; ok {
			v, err := cas.DecodeJSON(raw)
			if err != nil {
				p.add("", field+"/default", "%v", err)
			} else {
				d.Default, d.HasDefault = v, true
			}
		}
		if raw, ok := m["into"]; !ok {
			p.add("", field+"/into", "required: the node inputs the value goes into")
		} else {
			var into []struct {
				Node    *string `json:"node"`
				Pointer *string `json:"pointer"`
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if kindOf(raw) != kindArray || dec.Decode(&into) != nil || len(into) == 0 {
				p.add("", field+"/into", `want a non-empty array of {"node": NODE, "pointer": POINTER}`)
			}
			for i, t := range into {
				at := fmt.Sprintf("%s/into/%d", field, i)
				if t.Node == nil || t.Pointer == nil {
					p.add("", at, `want {"node": NODE, "pointer": POINTER}`)
					continue
				}
				if toks, err := splitPointer(*t.Pointer); err != nil || len(toks) == 0 {
					p.add("", at+"/pointer", "want a JSON Pointer to a member of the input, such as /os")
					continue
				}
				d.Into = append(d.Into, Target{Node: *t.Node, Pointer: *t.Pointer})
			}
		}
		if d.HasDefault && d.Critical {
			p.add("", field+"/default", "a critical decision is asked, never defaulted")
		}
		if d.HasDefault {
			if err := d.Check(d.Default); err != nil {
				p.add("", field+"/default", "%v", err)
			}
		}
		out[name] = d
	}
	return out
}

func compileDecisionSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := "hg:///decisions/" + name
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// validateDecisions checks that every decision reaches existing nodes,
// and that no two decisions set the same member of an input.
func (w *WorkOrder) validateDecisions(add func(node, field, format string, args ...any)) {
	seen := map[Target]string{}
	for _, d := range w.DecisionList() {
		for i, t := range d.Into {
			field := fmt.Sprintf("decisions/%s/into/%d", escapeToken(d.Name), i)
			n := w.Nodes[t.Node]
			if n == nil {
				add("", field+"/node", "unknown node %q", t.Node)
				continue
			}
			if other, ok := seen[t]; ok {
				add("", field, "decision %q sets node %q input%s too", other, t.Node, t.Pointer)
				continue
			}
			seen[t] = d.Name
			// The value must have a place: the parent must exist.
			probe := n.Input()
			if err := setAt(probe, t.Pointer, true); err != nil {
				add("", field+"/pointer", "node %q input%s: %v", t.Node, t.Pointer, err)
			}
		}
	}
	for i, name := range w.Mandatory {
		if w.Nodes[name] == nil {
			add("", fmt.Sprintf("outcome/mandatory/%d", i), "unknown node %q", name)
		}
	}
}

// CheckClass reports why s cannot name a task class (the rule of names).
func CheckClass(s string) error {
	if !ValidName(s) {
		return &FieldError{Field: "class", Msg: fmt.Sprintf("task class %q: %s", s, nameRule)}
	}
	return nil
}
