package haygent

import "github.com/haygent/hg/haygent/sandbox"

// redactStrings returns v (a value in the data model) with every string in
// it, map keys included, passed through [sandbox.Redact] with secrets. It
// is how a value taken from a step's output is made safe to store.
func redactStrings(v any, secrets []string) any {
	if len(secrets) == 0 {
		return v
	}
	switch x := v.(type) {
	case string:
		return string(sandbox.Redact([]byte(x), secrets))
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactStrings(e, secrets)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[redactStrings(k, secrets).(string)] = redactStrings(e, secrets)
		}
		return out
	}
	return v
}
