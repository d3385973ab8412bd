package haygent

import (
	"fmt"
	"strconv"
	"strings"
)

// The run state is one JSON-like document that packets snapshot:
//
//	{"input": ..., "adjustable": ..., "steps": {"<id>": ...}, "output": ..., "failures": [...]}
//
// Steps read and write it through JSON pointers (RFC 6901).

// pointerGet returns the value at ptr in doc.
func pointerGet(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	parts, err := SplitPointer(ptr)
	if err != nil {
		return nil, false
	}
	cur := doc
	for _, p := range parts {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// stateObjects are the entries of the run state the runtime itself reads
// as objects: it merges accepted proposals into "adjustable", records exec
// steps under "steps" and packs "output" into the output packet.
var stateObjects = map[string]bool{"input": true, "adjustable": true, "steps": true, "output": true}

// pointerSet sets the value at ptr in doc, creating maps on the way. It
// refuses to replace one of the state's objects with anything else, so
// the runtime never finds a string where it keeps its own records.
func pointerSet(doc map[string]any, ptr string, v any) error {
	parts, err := SplitPointer(ptr)
	if err != nil || len(parts) == 0 {
		return fmt.Errorf("bad JSON pointer %q", ptr)
	}
	if len(parts) == 1 && stateObjects[parts[0]] {
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("JSON pointer %q would replace the state's %s object with a non-object", ptr, parts[0])
		}
	}
	cur := doc
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			if _, exists := cur[p]; exists {
				return fmt.Errorf("JSON pointer %q crosses a non-object", ptr)
			}
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	cur[parts[len(parts)-1]] = v
	return nil
}

func SplitPointer(ptr string) ([]string, error) {
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("JSON pointer %q must start with /", ptr)
	}
	parts := strings.Split(ptr[1:], "/")
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

// cloneValue deep-copies a JSON-like value, so packets never share maps.
func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneValue(e)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = cloneValue(e)
		}
		return s
	default:
		return v
	}
}
