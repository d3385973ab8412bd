package dag

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Resolver tells Validate about the Haygents a Work Order names.
type Resolver interface {
	// Haygent resolves the path written in the Work Order; it returns an
	// error if there is no valid Haygent package there.
	Haygent(path string) (HaygentInfo, error)
}

// HaygentInfo is what [WorkOrder.Validate] needs to know about a Haygent
// package.
type HaygentInfo struct {
	// Dir is the package directory, absolute.
	Dir string
	// Output reports whether the package's output contract declares the
	// field at pointer. The pointer is relative to the output document,
	// which is the payload of the output packet of the upstream node's
	// receipt: "/tree", never "/output/tree" (see the package
	// documentation). Validate never asks about the empty pointer (the
	// whole document is always there). A nil Output declares nothing.
	Output func(pointer string) bool
}

// Validate checks the Work Order as a graph and against its Haygents and
// returns every problem at once: an errors.Join of [*FieldError] values,
// each wrapping [ErrInvalid], in a fixed order (document, then each node as
// written, then cycles, then the outcome). See the package documentation
// for the messages.
//
// res resolves each distinct Haygent path once. With a nil res, Validate
// checks only the graph and the references' syntax; the Haygents and the
// output contracts are not checked.
func (w *WorkOrder) Validate(res Resolver) error {
	var errs []error
	add := func(node, field, format string, args ...any) {
		errs = append(errs, &FieldError{Node: node, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if len(w.Order) == 0 {
		add("", "nodes", "no nodes")
	}

	type resolved struct {
		info HaygentInfo
		err  error
	}
	cache := map[string]*resolved{}
	resolve := func(path string) *resolved {
		if r, ok := cache[path]; ok {
			return r
		}
		info, err := res.Haygent(path)
		r := &resolved{info, err}
		cache[path] = r
		return r
	}

	for _, name := range w.Order {
		n := w.Nodes[name]
		if res != nil {
			if r := resolve(n.Haygent); r.err != nil {
				add(name, "haygent", "%v", r.err)
			}
		}
		needs := map[string]bool{}
		for _, d := range n.Needs {
			switch {
			case d == name:
				add(name, "needs", "depends on itself")
			case w.Nodes[d] == nil:
				add(name, "needs", "unknown node %q", d)
			case needs[d]:
				add(name, "needs", "%q listed twice", d)
			}
			needs[d] = true
		}
		if ws := n.Workspace; ws != nil && ws.From != "" {
			switch {
			case ws.From == name:
				add(name, "workspace/from", "a node cannot start from its own workspace")
			case w.Nodes[ws.From] == nil:
				add(name, "workspace/from", "unknown node %q", ws.From)
			case !needs[ws.From]:
				add(name, "workspace/from", "%q is not in needs: a workspace flows only along a needs edge", ws.From)
			}
		}
		for _, ref := range n.Refs() {
			field := "input" + ref.At
			_, perr := ParsePointer(ref.Pointer)
			if perr != nil {
				add(name, field, "pointer %q: %v", ref.Pointer, perr)
			}
			up := w.Nodes[ref.From]
			switch {
			case !needs[ref.From]:
				add(name, field, "%q node %q is not in needs", "from", ref.From)
			case perr != nil || up == nil || ref.From == name || res == nil || ref.Pointer == "":
				// Reported above, or nothing more to check.
			default:
				r := resolve(up.Haygent)
				if r.err == nil && (r.info.Output == nil || !r.info.Output(ref.Pointer)) {
					add(name, field, "pointer %q: not declared by the output contract of node %q", ref.Pointer, ref.From)
				}
			}
		}
	}

	cycles, more := w.cycles()
	for _, c := range cycles {
		add(c[0], "needs", "cycle %s", strings.Join(c, " -> "))
	}
	if more > 0 {
		add("", "nodes", "%d more nodes lie on cycles not listed here", more)
	}

	seen := map[string]bool{}
	for _, r := range w.Require {
		switch {
		case w.Nodes[r] == nil:
			add("", "outcome/require", "unknown node %q", r)
		case seen[r]:
			add("", "outcome/require", "%q listed twice", r)
		}
		seen[r] = true
	}
	w.validateDecisions(add)
	return errors.Join(errs...)
}

// SchemaResolver returns a [Resolver] for Work Orders in directory base.
// A Haygent path is taken relative to base (an absolute one as it is);
// load is called with the package's absolute directory and returns the
// output schema (contracts/output.schema.json) as decoded JSON, or an
// error if there is no valid package there. The scheduler passes a
// function that calls haygent.Load; tests can pass a fake.
//
// Output answers by walking the schema: a token is declared when the
// schema at that point lists it under "properties", or, for an array
// index, under "prefixItems" or "items"; the branches of "allOf", "anyOf"
// and "oneOf" are searched too. Nothing else declares a field.
func SchemaResolver(base string, load func(dir string) (outputSchema map[string]any, err error)) Resolver {
	return schemaResolver{base: base, load: load}
}

type schemaResolver struct {
	base string
	load func(string) (map[string]any, error)
}

func (s schemaResolver) Haygent(path string) (HaygentInfo, error) {
	if path == "" {
		return HaygentInfo{}, errors.New("empty Haygent path")
	}
	dir := filepath.FromSlash(path)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(s.base, dir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return HaygentInfo{}, fmt.Errorf("Haygent %q: %w", path, err)
	}
	schema, err := s.load(dir)
	if err != nil {
		return HaygentInfo{}, fmt.Errorf("no valid Haygent package at %q: %w", path, err)
	}
	return HaygentInfo{Dir: dir, Output: func(pointer string) bool {
		toks, err := ParsePointer(pointer)
		return err == nil && declares(schema, toks, 0)
	}}, nil
}

// maxSchemaDepth bounds the recursion through allOf/anyOf/oneOf branches.
const maxSchemaDepth = 64

// declares reports whether schema s declares the path toks.
func declares(s any, toks []string, depth int) bool {
	if len(toks) == 0 {
		return true
	}
	m, ok := s.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return false
	}
	t := toks[0]
	if props, ok := m["properties"].(map[string]any); ok {
		if sub, ok := props[t]; ok && declares(sub, toks[1:], depth+1) {
			return true
		}
	}
	if i, ok := arrayIndex(t); ok {
		if pre, ok := m["prefixItems"].([]any); ok && i < len(pre) {
			if declares(pre[i], toks[1:], depth+1) {
				return true
			}
		}
		switch items := m["items"].(type) {
		case map[string]any:
			if declares(items, toks[1:], depth+1) {
				return true
			}
		case []any: // the tuple form of drafts before 2020-12
			if i < len(items) && declares(items[i], toks[1:], depth+1) {
				return true
			}
		case bool:
			if items && len(toks) == 1 {
				return true
			}
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		branches, _ := m[kw].([]any)
		if slices.ContainsFunc(branches, func(b any) bool { return declares(b, toks, depth+1) }) {
			return true
		}
	}
	return false
}
