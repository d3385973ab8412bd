package textsafe

import (
	"fmt"
	"io"
	"reflect"
)

// Fprintf is fmt.Fprintf with every argument escaped (see [Escape]); the
// format itself is the caller's text and is written as it is, so a line
// the format ends is the only line there is.
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	return fmt.Fprintf(w, format, Args(args)...)
}

// Sprintf is fmt.Sprintf with every argument escaped.
func Sprintf(format string, args ...any) string {
	return fmt.Sprintf(format, Args(args)...)
}

// Args wraps each argument so that fmt prints it escaped: a string (or a
// value of a string type) is escaped before it is formatted, so widths
// count what is shown; any other value (an error, a Stringer, a list) is
// formatted first and the text escaped. The %q verb is left to fmt, whose
// quoting already escapes every such character.
func Args(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = escaped{a}
	}
	return out
}

type escaped struct{ v any }

func (e escaped) Format(f fmt.State, verb rune) {
	spec := fmt.FormatString(f, verb)
	if verb == 'q' {
		fmt.Fprintf(f, spec, e.v)
		return
	}
	if s, ok := e.v.(string); ok {
		fmt.Fprintf(f, spec, Escape(s))
		return
	}
	if rv := reflect.ValueOf(e.v); rv.Kind() == reflect.String && !implementsText(e.v) {
		fmt.Fprintf(f, spec, Escape(rv.String()))
		return
	}
	io.WriteString(f, Escape(fmt.Sprintf(spec, e.v)))
}

// implementsText reports whether v prints itself (an error or a
// Stringer), in which case its own text is what is escaped.
func implementsText(v any) bool {
	switch v.(type) {
	case error, fmt.Stringer, fmt.Formatter:
		return true
	}
	return false
}
