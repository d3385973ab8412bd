package dag_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/dag"
)

// echoSchema is the output contract assumed for the echo and fail
// fixture Haygents.
var echoSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"value": map[string]any{},
		"trail": map[string]any{"type": "array"},
	},
}

// fakeSchemas are the output contracts of the fake Haygents, by the last
// element of their path.
var fakeSchemas = map[string]map[string]any{
	"echo": echoSchema,
	"fail": echoSchema,
	"deep": {
		"type": "object",
		"properties": map[string]any{
			"meta": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"items": map[string]any{
						"type":  "array",
						"items": map[string]any{"properties": map[string]any{"name": map[string]any{}}},
					},
				},
			},
		},
	},
	"empty": {"type": "object"},
}

var errNoPackage = errors.New("no such package")

// fakeResolver resolves the fake Haygents: any path whose last element is
// a key of fakeSchemas.
func fakeResolver() dag.Resolver {
	return dag.SchemaResolver("/wo", func(dir string) (map[string]any, error) {
		if s, ok := fakeSchemas[filepath.Base(dir)]; ok {
			return s, nil
		}
		return nil, errNoPackage
	})
}

// messages returns the messages of the problems in err.
func messages(err error) []string {
	var out []string
	for _, p := range dag.Problems(err) {
		out = append(out, p.Error())
	}
	return out
}

func mustParse(t testing.TB, doc string) *dag.WorkOrder {
	t.Helper()
	w, err := dag.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, doc)
	}
	return w
}

func equalLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\ngot:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}
