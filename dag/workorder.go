package dag

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

// MaxDepth bounds the nesting of arrays and objects in a Work Order file,
// so that every input stays within DAG-CBOR's nesting limit once stored.
const MaxDepth = 256

// ErrInvalid is wrapped by every error about a Work Order's contents.
var ErrInvalid = errors.New("invalid Work Order")

// FieldError is one problem with a Work Order. Node is the node it
// concerns, empty for the document itself. Field is the path of the value
// at fault, as JSON Pointer segments without the leading slash, relative to
// the node object, or to the document when Node is empty: "needs",
// "input/tree", "outcome/require". It is empty when the problem concerns
// the node as a whole or the document's syntax.
type FieldError struct {
	Node, Field, Msg string
}

// Error returns `node "N": field "F": MSG`, leaving out the parts that are
// empty.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Node != "" {
		fmt.Fprintf(&b, "node %q: ", e.Node)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns [ErrInvalid].
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Problems lists the [*FieldError] values inside err, which may be one
// FieldError or an [errors.Join] of them, in order. It returns nil for nil.
func Problems(err error) []*FieldError {
	if err == nil {
		return nil
	}
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if fe := (*FieldError)(nil); errors.As(err, &fe) {
			out = append(out, fe)
		}
	}
	walk(err)
	return out
}

// WorkOrder is a parsed Work Order. Parse fills it; nothing in this
// package changes it afterwards.
type WorkOrder struct {
	Name      string           // "workorder"
	Objective string           // "objective"
	Order     []string         // node names, in the order written
	Nodes     map[string]*Node // by name
	Require   []string         // "outcome"."require", as written
	// Mandatory ("outcome"."mandatory") lists nodes that must be done
	// for the run to be complete though the target state does not need
	// them (a notification, a clean-up).
	Mandatory []string
	// Class ("class") names the task class whose belief log the
	// decisions are read from and written to; the order's name when
	// not given.
	Class     string
	Decisions map[string]*Decision // "decisions", by name
	// MaxAttempts ("max_attempts", 1 to MaxAttemptsLimit) is how many
	// times a node of the order may be started, over every resume and
	// retry of a run, before its circuit breaker opens; 0 when the order
	// does not say, and the package's manifest, or the default, decides.
	MaxAttempts int
}

// MaxAttemptsLimit bounds a Work Order's max_attempts.
const MaxAttemptsLimit = 100

// Node is one node of a Work Order.
type Node struct {
	Name string
	// Haygent is the package path as written: slash-separated, relative to
	// the directory of the Work Order file. In a Work Order made by
	// [FromObject] it is the package's CID instead.
	Haygent string
	// Needs lists the nodes this one waits for, as written.
	Needs []string
	// Workspace is where the node's workspace comes from; nil for a new
	// empty directory.
	Workspace *Workspace
	// input is the input document (see [Node.Input]) encoded as
	// DAG-CBOR; nil for the empty map. Kept as maps, the inputs of a Work Order of 100,000 nodes
	// took 150 MB of small objects, which the collector marked again at
	// every cycle of the run.
	input []byte
}

// Input returns the node's input document in the data model (see
// [cas.DecodeJSON]), references included as {"from", "pointer"} maps:
// a copy of its own, never nil.
func (n *Node) Input() map[string]any {
	if len(n.input) == 0 {
		return map[string]any{}
	}
	v, err := cas.DecodeNode(n.input)
	m, ok := v.(map[string]any)
	if err != nil || !ok {
		// SetInput stored what EncodeNode made of a map.
		panic(fmt.Sprintf("dag: node %q: stored input does not decode: %v", n.Name, err))
	}
	return m
}

// SetInput replaces the node's input document, which must be a value of
// the data model (see [cas.EncodeNode]).
func (n *Node) SetInput(in map[string]any) error {
	if in == nil {
		in = map[string]any{}
	}
	data, err := cas.EncodeNode(in)
	if err != nil {
		return err
	}
	n.input = data
	return nil
}

// Ref is a reference in a node's input: the value at Pointer in the output
// document of node From.
type Ref struct {
	At      string // JSON Pointer to the reference within the input, e.g. "/tree"
	From    string // upstream node
	Pointer string // JSON Pointer into From's output document
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ValidName reports whether s can name a node or a Work Order:
// [A-Za-z0-9][A-Za-z0-9_.-]{0,63}.
func ValidName(s string) bool { return nameRE.MatchString(s) }

const nameRule = "want a letter or digit, then up to 63 letters, digits, '_', '.' or '-'"

// Parse decodes a Work Order strictly (see the package documentation for
// the format). It checks the file's syntax and shape only: names, types,
// required keys, unknown and duplicate keys, the form of references. What
// concerns the graph and the Haygents is [WorkOrder.Validate]'s job. The
// error is one [*FieldError], or several joined with [errors.Join]; all
// wrap [ErrInvalid].
func Parse(data []byte) (*WorkOrder, error) {
	if !utf8.Valid(data) {
		return nil, &FieldError{Msg: "not valid UTF-8"}
	}
	order, err := scan(data)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if kindOf(data) != kindObject || json.Unmarshal(data, &top) != nil {
		return nil, &FieldError{Msg: "a Work Order must be a JSON object"}
	}
	p := &parser{}
	w := &WorkOrder{Nodes: map[string]*Node{}}
	p.unknown("", top, "workorder", "objective", "class", "decisions", "nodes", "outcome", "max_attempts")

	if raw, ok := top["workorder"]; !ok {
		p.add("", "workorder", "required")
	} else if s, ok := p.str("", "workorder", raw); ok {
		if !ValidName(s) {
			p.add("", "workorder", "name %q: %s", s, nameRule)
		}
		w.Name = s
	}
	if raw, ok := top["objective"]; !ok {
		p.add("", "objective", "required")
	} else if s, ok := p.str("", "objective", raw); ok {
		if strings.TrimSpace(s) == "" {
			p.add("", "objective", "must not be empty")
		}
		w.Objective = s
	}
	w.Class = w.Name
	if raw, ok := top["class"]; ok {
		if s, ok := p.str("", "class", raw); ok {
			if !ValidName(s) {
				p.add("", "class", "name %q: %s", s, nameRule)
			}
			w.Class = s
		}
	}
	if raw, ok := top["decisions"]; ok {
		w.Decisions = p.decisions(raw)
	}
	if raw, ok := top["max_attempts"]; ok {
		var n int
		if kindOf(raw) != kindOther || json.Unmarshal(raw, &n) != nil || n < 1 || n > MaxAttemptsLimit {
			p.add("", "max_attempts", "want an integer from 1 to %d", MaxAttemptsLimit)
		}
		w.MaxAttempts = n
	}
	if raw, ok := top["nodes"]; !ok {
		p.add("", "nodes", "required")
	} else if nodes, ok := p.object("", "nodes", raw); ok {
		for _, name := range order {
			if n := p.node(name, nodes[name]); n != nil {
				w.Order = append(w.Order, name)
				w.Nodes[name] = n
			}
		}
	}
	if raw, ok := top["outcome"]; ok {
		if out, ok := p.object("", "outcome", raw); ok {
			p.unknown("outcome/", out, "require", "mandatory")
			if raw, ok := out["require"]; ok {
				if req, ok := p.strs("", "outcome/require", raw); ok {
					w.Require = req
				}
			}
			if raw, ok := out["mandatory"]; ok {
				if m, ok := p.strs("", "outcome/mandatory", raw); ok {
					w.Mandatory = m
				}
			}
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return w, nil
}

type parser struct{ errs []error }

func (p *parser) add(node, field, format string, args ...any) {
	p.errs = append(p.errs, &FieldError{Node: node, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// unknown reports keys of m outside allowed, in sorted order. prefix is
// put before each key to make the field path.
func (p *parser) unknown(prefix string, m map[string]json.RawMessage, allowed ...string) {
	p.unknownIn("", prefix, m, allowed...)
}

func (p *parser) unknownIn(node, prefix string, m map[string]json.RawMessage, allowed ...string) {
	var bad []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	for _, k := range bad {
		p.add(node, prefix+escapeToken(k), "unknown field")
	}
}

type jsonKind int

const (
	kindOther jsonKind = iota
	kindObject
	kindArray
	kindString
)

// kindOf tells the kind of the JSON value in raw from its first byte.
func kindOf(raw []byte) jsonKind {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return kindOther
	}
	switch raw[0] {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	}
	return kindOther
}

func (p *parser) str(node, field string, raw json.RawMessage) (string, bool) {
	var s string
	if kindOf(raw) != kindString || json.Unmarshal(raw, &s) != nil {
		p.add(node, field, "want a string")
		return "", false
	}
	return s, true
}

func (p *parser) strs(node, field string, raw json.RawMessage) ([]string, bool) {
	var s []string
	if kindOf(raw) != kindArray || json.Unmarshal(raw, &s) != nil {
		p.add(node, field, "want an array of strings")
		return nil, false
	}
	return s, true
}

func (p *parser) object(node, field string, raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if kindOf(raw) != kindObject || json.Unmarshal(raw, &m) != nil {
		p.add(node, field, "want an object")
		return nil, false
	}
	return m, true
}

// node parses one node; it returns nil if the node is unusable.
func (p *parser) node(name string, raw json.RawMessage) *Node {
	before := len(p.errs)
	if name == "" {
		p.add("", "nodes", "empty node name")
		return nil
	}
	if !ValidName(name) {
		p.add(name, "", "invalid node name: %s", nameRule)
		return nil
	}
	m, ok := p.object(name, "", raw)
	if !ok {
		return nil
	}
	p.unknownIn(name, "", m, "haygent", "needs", "input", "workspace")
	n := &Node{Name: name}
	if raw, ok := m["haygent"]; !ok {
		p.add(name, "haygent", "required")
	} else if s, ok := p.str(name, "haygent", raw); ok {
		if s == "" {
			p.add(name, "haygent", "must not be empty")
		}
		n.Haygent = s
	}
	if raw, ok := m["needs"]; ok {
		if needs, ok := p.strs(name, "needs", raw); ok {
			n.Needs = needs
		}
	}
	if raw, ok := m["workspace"]; ok {
		n.Workspace = p.workspace(name, raw)
	}
	if raw, ok := m["input"]; ok {
		if kindOf(raw) != kindObject {
			p.add(name, "input", "want an object")
		} else if v, err := cas.DecodeJSON(raw); err != nil {
			p.add(name, "input", "%v", err)
		} else {
			p.checkInput(name, "input", v)
			if err := n.SetInput(v.(map[string]any)); err != nil {
				p.add(name, "input", "%v", err)
			}
		}
	}
	if len(p.errs) > before {
		return nil
	}
	return n
}

// checkInput refuses links and bytes, and references that are not two
// strings.
func (p *parser) checkInput(node, field string, v any) {
	switch x := v.(type) {
	case map[string]any:
		if isRefShape(x) {
			_, ok1 := x["from"].(string)
			_, ok2 := x["pointer"].(string)
			if !ok1 || !ok2 {
				p.add(node, field, `a reference is {"from": NODE, "pointer": POINTER}, two strings`)
			}
			return
		}
		for _, k := range sortedKeys(x) {
			p.checkInput(node, field+"/"+escapeToken(k), x[k])
		}
	case []any:
		for i, e := range x {
			p.checkInput(node, field+"/"+strconv.Itoa(i), e)
		}
	case cid.Cid, []byte:
		p.add(node, field, "DAG-JSON links and bytes are not allowed in an input")
	}
}

func isRefShape(m map[string]any) bool {
	if len(m) != 2 {
		return false
	}
	_, ok1 := m["from"]
	_, ok2 := m["pointer"]
	return ok1 && ok2
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// scan walks every token of data: it refuses invalid JSON, duplicate keys
// at any depth, nesting deeper than MaxDepth and trailing data, and returns
// the keys of the top-level "nodes" object in the order written.
func scan(data []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var order []string
	var walk func(path []string) error
	walk = func(path []string) error {
		tok, err := dec.Token()
		if err != nil {
			return syntaxErr(err)
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		if len(path) >= MaxDepth {
			return &FieldError{Msg: fmt.Sprintf("nested deeper than %d", MaxDepth)}
		}
		switch d {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return syntaxErr(err)
				}
				k := kt.(string)
				if seen[k] {
					return dupErr(path, k)
				}
				seen[k] = true
				if len(path) == 1 && path[0] == "nodes" {
					order = append(order, k)
				}
				if err := walk(append(path, k)); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(append(path, strconv.Itoa(i))); err != nil {
					return err
				}
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return syntaxErr(err)
		}
		return nil
	}
	if err := walk(nil); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &FieldError{Msg: "invalid JSON: data after the Work Order"}
	}
	return order, nil
}

func syntaxErr(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return &FieldError{Msg: "invalid JSON: " + msg}
}

// dupErr reports key k appearing twice in the object at path.
func dupErr(path []string, k string) error {
	if len(path) == 1 && path[0] == "nodes" {
		return &FieldError{Node: k, Msg: "duplicate node name"}
	}
	node := ""
	rest := path
	if len(path) >= 2 && path[0] == "nodes" {
		node, rest = path[1], path[2:]
	}
	segs := make([]string, 0, len(rest)+1)
	for _, s := range append(slices.Clone(rest), k) {
		segs = append(segs, escapeToken(s))
	}
	return &FieldError{Node: node, Field: strings.Join(segs, "/"), Msg: "duplicate key"}
}

// Required returns the nodes whose success is the Work Order's success:
// outcome.require if it names any, else every node, in written order.
func (w *WorkOrder) Required() []string {
	if len(w.Require) > 0 {
		return slices.Clone(w.Require)
	}
	return slices.Clone(w.Order)
}

// Refs returns the references in the node's input, in a fixed order (map
// keys sorted, array elements in order). It does not check them.
func (n *Node) Refs() []Ref {
	var out []Ref
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := asRef(x); ok {
				r.At = at
				out = append(out, r)
				return
			}
			for _, k := range sortedKeys(x) {
				walk(at+"/"+escapeToken(k), x[k])
			}
		case []any:
			for i, e := range x {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("", n.Input())
	return out
}

func asRef(m map[string]any) (Ref, bool) {
	if !isRefShape(m) {
		return Ref{}, false
	}
	from, ok1 := m["from"].(string)
	ptr, ok2 := m["pointer"].(string)
	return Ref{From: from, Pointer: ptr}, ok1 && ok2
}

// Resolve returns a deep copy of the node's input in which every reference
// is replaced by value(from, pointer), typically
// [Lookup](outputs[from], pointer) over the accepted output documents of
// the node's needs. The first error value returns stops it, wrapped with
// the reference's place in the input.
func (n *Node) Resolve(value func(from, pointer string) (any, error)) (map[string]any, error) {
	// Input is a copy of the node's own: references are replaced in it.
	var walk func(at string, v any) (any, error)
	walk = func(at string, v any) (any, error) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := asRef(x); ok {
				got, err := value(r.From, r.Pointer)
				if err != nil {
					return nil, fmt.Errorf("node %q: input%s: %w", n.Name, at, err)
				}
				return got, nil
			}
			for _, k := range sortedKeys(x) {
				e, err := walk(at+"/"+escapeToken(k), x[k])
				if err != nil {
					return nil, err
				}
				x[k] = e
			}
		case []any:
			for i, e := range x {
				v, err := walk(at+"/"+strconv.Itoa(i), e)
				if err != nil {
					return nil, err
				}
				x[i] = v
			}
		}
		return v, nil
	}
	v, err := walk("", n.Input())
	if err != nil {
		return nil, err
	}
	// An input that is one reference as a whole takes the referenced
	// value, which must be an object like any input.
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("node %q: input: the reference gives %s, not an object", n.Name, cas.KindOf(v))
	}
	return m, nil
}
