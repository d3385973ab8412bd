package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// Evidence kinds a gate may name. Any other kind is a lint error.
const (
	KindExit       = "exit"
	KindTestReport = "test_report"
	KindDigest     = "digest"
	KindFile       = "file"
	KindRead       = "read"
	KindMutation   = "mutation"
	KindHTTP       = "http"
	KindApproval   = "approval"
)

var knownKinds = []string{
	KindExit, KindTestReport, KindDigest, KindFile,
	KindRead, KindMutation, KindHTTP, KindApproval,
}

// IsKnownKind reports whether kind is one of the evidence kinds above.
func IsKnownKind(kind string) bool { return slices.Contains(knownKinds, kind) }

// Values of the on_* rules, and of Result.Action.
const (
	ActionPass = "pass" // only ever an Action, never a rule: PASS is not declared, it is earned
	ActionFail = "fail" // the gate counts as failed; repair may run
	ActionHalt = "halt" // stop now; no repair
)

// Spec is one gate as written in gates.json. Field names are the JSON keys,
// matched exactly (case included). See the package documentation for the
// meaning of each field.
//
// Parse fills a Spec from JSON and checks only its shape; Lint and Compile
// check its meaning. MaxAge is kept as written so that Lint can name an
// unparseable duration.
type Spec struct {
	ID              string          `json:"id"`
	Evidence        string          `json:"evidence"`
	Subject         string          `json:"subject,omitempty"`
	Predicate       string          `json:"predicate"`
	MaxAge          string          `json:"max_age,omitempty"`
	Contradicts     []Contradiction `json:"contradicts,omitempty"`
	OnMissing       string          `json:"on_missing"`
	OnStale         string          `json:"on_stale"`
	OnInvalid       string          `json:"on_invalid"`
	OnContradictory string          `json:"on_contradictory"`
	OnTimeout       string          `json:"on_timeout"`
}

// Contradiction is one entry of a gate's "contradicts" list: evidence of
// another kind that, when its Predicate holds, shows the gate's own evidence
// cannot be trusted. Subject empty means the subject of the evidence the gate
// selected.
type Contradiction struct {
	Evidence  string `json:"evidence"`
	Subject   string `json:"subject,omitempty"`
	Predicate string `json:"predicate"`
}

// file is the whole of gates.json.
type file struct {
	Gates []Spec `json:"gates"`
}

var (
	fileKeys          = []string{"gates"}
	specKeys          = []string{"id", "evidence", "subject", "predicate", "max_age", "contradicts", "on_missing", "on_stale", "on_invalid", "on_contradictory", "on_timeout"}
	contradictionKeys = []string{"evidence", "subject", "predicate"}
)

// maxJSONDepth bounds nesting in gates.json; the schema needs 4 levels.
const maxJSONDepth = 32

// Parse decodes gates.json. It checks shape only: the input must be UTF-8
// JSON holding exactly one object {"gates": [...]}, with no duplicate keys,
// no key other than the schema's (compared case-sensitively, unlike
// encoding/json), no null values, and every value of the schema's JSON type.
// Errors name the gate (by index, and by id when it has one) and the field.
//
// Parse does not check meaning (missing rules, bad predicates, unknown kinds,
// durations): pass the result to Lint or Compile. An empty "gates" list
// parses; Lint reports it.
func Parse(data []byte) ([]Spec, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("gates.json: not valid UTF-8")
	}
	if err := checkJSON(data); err != nil {
		return nil, fmt.Errorf("gates.json: %w", err)
	}
	top, err := object(data, fileKeys)
	if err != nil {
		return nil, fmt.Errorf("gates.json: %w", err)
	}
	raw, ok := top["gates"]
	if !ok {
		return nil, errors.New(`gates.json: field "gates" is missing`)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errors.New(`gates.json: field "gates" must be an array of gates`)
	}
	specs := make([]Spec, 0, len(items))
	for i, item := range items {
		s, err := parseSpec(item)
		if err != nil {
			return nil, fmt.Errorf("gates.json: %s: %w", parseLabel(i, item), err)
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// parseLabel names gate i for an error: gates[i], and its id if it has a
// string one.
func parseLabel(i int, item json.RawMessage) string {
	var probe struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(item, &probe) == nil {
		if id, ok := probe.ID.(string); ok && id != "" {
			return fmt.Sprintf("gates[%d] (%q)", i, id)
		}
	}
	return fmt.Sprintf("gates[%d]", i)
}

func parseSpec(item json.RawMessage) (Spec, error) {
	fields, err := object(item, specKeys)
	if err != nil {
		return Spec{}, err
	}
	if raw, ok := fields["contradicts"]; ok {
		var rules []json.RawMessage
		if err := json.Unmarshal(raw, &rules); err != nil {
			return Spec{}, errors.New(`field "contradicts" must be an array`)
		}
		for j, r := range rules {
			if _, err := object(r, contradictionKeys); err != nil {
				return Spec{}, fmt.Errorf("contradicts[%d]: %w", j, err)
			}
			var c Contradiction
			if err := strictDecode(r, &c); err != nil {
				return Spec{}, fmt.Errorf("contradicts[%d]: %w", j, err)
			}
		}
	}
	var s Spec
	if err := strictDecode(item, &s); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// object decodes one JSON object into its raw fields and refuses keys not in
// allowed (case-sensitively) and null values.
func object(data []byte, allowed []string) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return nil, errors.New("must be a JSON object")
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("unknown field %q (fields are %s)", k, strings.Join(allowed, ", "))
		}
		if bytes.Equal(bytes.TrimSpace(fields[k]), []byte("null")) {
			return nil, fmt.Errorf("field %q: null is not allowed", k)
		}
	}
	return fields, nil
}

// strictDecode decodes data into v with unknown fields refused and turns
// type errors into messages naming the field.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %q: want %s, got JSON %s", te.Field, jsonTypeName(te.Type.Kind().String()), te.Value)
		}
		return err
	}
	return nil
}

func jsonTypeName(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return goKind
}

// checkJSON walks the tokens of data and refuses syntax errors, duplicate
// object keys (encoding/json would silently keep the last), nesting deeper
// than maxJSONDepth, and anything after the first value.
func checkJSON(data []byte) error {
	type frame struct {
		obj     bool
		wantKey bool
		keys    map[string]bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	done := false
	valueDone := func() {
		if len(stack) == 0 {
			done = true
		} else if top := stack[len(stack)-1]; top.obj {
			top.wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			if !done {
				return errors.New("unexpected end of JSON input")
			}
			return nil
		}
		if err != nil {
			return err
		}
		if done {
			return errors.New("data after the top-level value")
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			key, ok := tok.(string)
			if !ok {
				return errors.New("object key is not a string")
			}
			if stack[n-1].keys[key] {
				return fmt.Errorf("duplicate key %q", key)
			}
			stack[n-1].keys[key] = true
			stack[n-1].wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return fmt.Errorf("nested deeper than %d levels", maxJSONDepth)
			}
			f := &frame{obj: tok == json.Delim('{')}
			if f.obj {
				f.wantKey = true
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}
