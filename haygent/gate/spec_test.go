package gate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const exampleJSON = `{"gates": [
  {"id": "TEST_PASS", "evidence": "test_report", "subject": "step:test",
   "predicate": "ev.total > 0 && ev.failed == 0",
   "max_age": "10m",
   "contradicts": [{"evidence": "exit", "subject": "step:test", "predicate": "ev.failed == 0 && other.code != 0"}],
   "on_missing": "fail", "on_stale": "fail", "on_invalid": "fail", "on_contradictory": "halt", "on_timeout": "fail"}
]}`

func TestParse(t *testing.T) {
	specs, err := Parse([]byte(exampleJSON))
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{{
		ID: "TEST_PASS", Evidence: "test_report", Subject: "step:test",
		Predicate: "ev.total > 0 && ev.failed == 0",
		MaxAge:    "10m",
		Contradicts: []Contradiction{
			{Evidence: "exit", Subject: "step:test", Predicate: "ev.failed == 0 && other.code != 0"},
		},
		OnMissing: "fail", OnStale: "fail", OnInvalid: "fail", OnContradictory: "halt", OnTimeout: "fail",
	}}
	if !reflect.DeepEqual(specs, want) {
		t.Fatalf("got %+v\nwant %+v", specs, want)
	}
	if probs := Lint(specs); probs != nil {
		t.Fatalf("Lint: %v", probs)
	}
}

func TestParseShapeOnly(t *testing.T) {
	// Meaning is Lint's job: a gate with no rules and a bad duration parses.
	specs, err := Parse([]byte(`{"gates": [{"id": "G", "evidence": "vibes", "predicate": "true", "max_age": "soon"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || specs[0].MaxAge != "soon" {
		t.Fatalf("got %+v", specs)
	}
	if probs := Lint(specs); len(probs) != 8 {
		t.Fatalf("Lint found %d problems: %v", len(probs), probs)
	}
	specs, err = Parse([]byte(`{"gates": []}`))
	if err != nil || len(specs) != 0 {
		t.Fatalf("got %v, %v", specs, err)
	}
}

func TestParseErrors(t *testing.T) {
	gate := func(fields string) string {
		return `{"gates": [{"id": "OK", "evidence": "exit", "predicate": "ev.code == 0", "on_missing": "fail", "on_stale": "fail", "on_invalid": "fail", "on_contradictory": "halt", "on_timeout": "fail"}, {` + fields + `}]}`
	}
	tests := []struct {
		name, input, want string
	}{
		{"empty", ``, "gates.json: unexpected end of JSON input"},
		{"syntax", `{"gates": [}`, "gates.json: invalid character"},
		{"not utf-8", "{\"gates\": [{\"id\": \"\xff\"}]}", "gates.json: not valid UTF-8"},
		{"trailing data", `{"gates": []} {}`, "gates.json: data after the top-level value"},
		{"trailing garbage", `{"gates": []} x`, "gates.json: invalid character 'x'"},
		{"top-level array", `[]`, "gates.json: must be a JSON object"},
		{"top-level null", `null`, "gates.json: must be a JSON object"},
		{"no gates", `{}`, `gates.json: field "gates" is missing`},
		{"unknown top-level field", `{"gates": [], "version": 1}`, `gates.json: unknown field "version" (fields are gates)`},
		{"gates not an array", `{"gates": {}}`, `gates.json: field "gates" must be an array of gates`},
		{"gates null", `{"gates": null}`, `gates.json: field "gates": null is not allowed`},
		{"gate not an object", `{"gates": ["G"]}`, `gates.json: gates[0]: must be a JSON object`},
		{"duplicate top-level key", `{"gates": [], "gates": []}`, `gates.json: duplicate key "gates"`},
		{"duplicate gate key", gate(`"id": "G", "predicate": "ev.ok", "predicate": "true"`), `gates.json: duplicate key "predicate"`},
		{"unknown field", gate(`"id": "G", "predicat": "ev.ok"`), `gates.json: gates[1] ("G"): unknown field "predicat" (fields are id, evidence, subject, predicate, max_age, contradicts, on_missing, on_stale, on_invalid, on_contradictory, on_timeout)`},
		{"field in the wrong case", gate(`"id": "G", "Predicate": "true"`), `gates.json: gates[1] ("G"): unknown field "Predicate"`},
		{"unknown field without id", gate(`"on_fail": "halt"`), `gates.json: gates[1]: unknown field "on_fail"`},
		{"null field", gate(`"id": "G", "subject": null`), `gates.json: gates[1] ("G"): field "subject": null is not allowed`},
		{"wrong type", gate(`"id": "G", "max_age": 600`), `gates.json: gates[1] ("G"): field "max_age": want a string, got JSON number`},
		{"wrong type for a rule", gate(`"id": "G", "on_stale": true`), `gates.json: gates[1] ("G"): field "on_stale": want a string, got JSON bool`},
		{"id not a string", gate(`"id": 7`), `gates.json: gates[1]: field "id": want a string, got JSON number`},
		{"contradicts not an array", gate(`"id": "G", "contradicts": {}`), `gates.json: gates[1] ("G"): field "contradicts" must be an array`},
		{"contradiction not an object", gate(`"id": "G", "contradicts": [1]`), `gates.json: gates[1] ("G"): contradicts[0]: must be a JSON object`},
		{"contradiction unknown field", gate(`"id": "G", "contradicts": [{"evidence": "exit", "when": "x"}]`), `gates.json: gates[1] ("G"): contradicts[0]: unknown field "when" (fields are evidence, subject, predicate)`},
		{"contradiction null", gate(`"id": "G", "contradicts": [{"evidence": null}]`), `gates.json: gates[1] ("G"): contradicts[0]: field "evidence": null is not allowed`},
		{"contradiction wrong type", gate(`"id": "G", "contradicts": [{"predicate": false}]`), `gates.json: gates[1] ("G"): contradicts[0]: field "predicate": want a string, got JSON bool`},
		{"too deep", `{"gates": [{"id": ` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}]}`, "gates.json: nested deeper than 32 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs, err := Parse([]byte(tt.input))
			if err == nil {
				t.Fatalf("parsed: %+v", specs)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got  %q\nwant %q", err, tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(exampleJSON))
	f.Add([]byte(`{"gates": []}`))
	f.Add([]byte(`{"gates": [{"id": "G", "evidence": "exit", "predicate": "ev.code == 0 || true", "contradicts": [{}]}]}`))
	f.Add([]byte(`{"gates": [{"id": "G", "max_age": "-5s", "predicate": "[1].all(ev, ev > 0)"}]}`))
	f.Add([]byte(`{"gates": [{"id": "G", "id": "H"}]}`))
	f.Add([]byte(`{"gates": [{"ID": "G", "predicate": null}]}`))
	f.Add([]byte(`[{"gates": 1}]`))
	f.Add([]byte("{\"gates\": [\"\xff\"]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		specs, err := Parse(data)
		if err != nil {
			if specs != nil {
				t.Fatal("specs with an error")
			}
			return
		}
		// What parses round-trips through encoding/json.
		out, err := json.Marshal(file{Gates: specs})
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if !reflect.DeepEqual(normalize(specs), normalize(again)) {
			t.Fatalf("round trip:\n%+v\n%+v", specs, again)
		}
		// Lint never panics on what Parse accepts.
		Lint(specs)
	})
}

// normalize makes empty and nil contradiction lists equal.
func normalize(specs []Spec) []Spec {
	out := append([]Spec(nil), specs...)
	for i := range out {
		if len(out[i].Contradicts) == 0 {
			out[i].Contradicts = nil
		}
	}
	return out
}
