package haygent

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileDefs compiles every entry of the schema's "$defs" (and the older
// "definitions"), nested ones included, so that [refCycle] sees the
// definitions no other part of the schema refers to yet. The compiler
// compiles subschemas lazily, from the root only.
func compileDefs(c *jsonschema.Compiler, url string, doc any) ([]*jsonschema.Schema, error) {
	var out []*jsonschema.Schema
	var walk func(ptr string, v any) error
	walk = func(ptr string, v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		for _, kw := range []string{"$defs", "definitions"} {
			defs, ok := m[kw].(map[string]any)
			if !ok {
				continue
			}
			names := make([]string, 0, len(defs))
			for name := range defs {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				p := ptr + "/" + kw + "/" + escapePointer(name)
				sch, err := c.Compile(url + "#" + p)
				if err != nil {
					return err
				}
				out = append(out, sch)
				if err := walk(p, defs[name]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk("", doc)
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// refCycle finds a cycle of subschemas that apply to the same value as the
// schema holding them ($ref, $dynamicRef, $recursiveRef, allOf, anyOf,
// oneOf, not, if, then, else, dependentSchemas): a definition whose $ref
// is itself, or a ring of definitions that only refer to each other.
// Validating anything against such a schema never reaches a keyword that
// looks at the value, so the validator can only give up with a "reference
// cycle" error that blames the input (JSON Schema 2020-12, core §9.4.1:
// "the behavior is undefined"). Recursion through a keyword that moves to
// a part of the value (properties, items, ...) is ordinary recursion and
// is allowed. It returns the schema locations of the first cycle found,
// the first one repeated at the end, or nil.
func refCycle(roots ...*jsonschema.Schema) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[*jsonschema.Schema]int{}
	var path []*jsonschema.Schema
	var found []*jsonschema.Schema
	var all []*jsonschema.Schema // every schema reachable by any keyword
	seen := map[*jsonschema.Schema]bool{}
	var collect func(s *jsonschema.Schema)
	collect = func(s *jsonschema.Schema) {
		if s == nil || seen[s] {
			return
		}
		seen[s] = true
		all = append(all, s)
		for _, c := range inPlace(s) {
			collect(c)
		}
		for _, c := range below(s) {
			collect(c)
		}
	}
	for _, r := range roots {
		collect(r)
	}
	var dfs func(s *jsonschema.Schema) bool
	dfs = func(s *jsonschema.Schema) bool {
		switch state[s] {
		case done:
			return false
		case onPath:
			i := len(path) - 1
			for path[i] != s {
				i--
			}
			found = append(append(found, path[i:]...), s)
			return true
		}
		state[s] = onPath
		path = append(path, s)
		for _, c := range inPlace(s) {
			if dfs(c) {
				return true
			}
		}
		path = path[:len(path)-1]
		state[s] = done
		return false
	}
	for _, s := range all {
		if dfs(s) {
			locs := make([]string, len(found))
			for i, f := range found {
				locs[i] = f.Location
			}
			return locs
		}
	}
	return nil
}

// inPlace lists the subschemas s applies to the value s itself is applied
// to.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		out = append(out, s.DependentSchemas[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if d, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			out = append(out, d)
		}
	}
	return nonNil(out)
}

// below lists the subschemas s applies to parts of its value.
func below(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		out = append(out, s.Properties[k])
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	out = append(out, s.PrefixItems...)
	return nonNil(out)
}

func nonNil(l []*jsonschema.Schema) []*jsonschema.Schema {
	out := l[:0]
	for _, s := range l {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// refCycleError describes a cycle found by [refCycle] in file, whose
// schema locations start with base, with pointers relative to file:
// "reference cycle at #/$defs/a: #/$defs/a -> #/$defs/b -> #/$defs/a: ...".
func refCycleError(base string, locs []string) error {
	short := make([]string, len(locs))
	for i, l := range locs {
		if rest, ok := strings.CutPrefix(l, base); ok {
			if rest == "" {
				rest = "#"
			}
			l = rest
		}
		short[i] = l
	}
	if len(short) == 2 {
		return fmt.Errorf("reference cycle at %s: it refers to itself for the same value, so no value can be checked against it", short[0])
	}
	return fmt.Errorf("reference cycle at %s: %s: each refers to the next for the same value, so no value can be checked against them",
		short[0], strings.Join(short, " -> "))
}
