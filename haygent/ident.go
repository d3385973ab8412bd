package haygent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/haygent/hg/internal/textsafe"
)

// maxIdentLen is the longest identifier of a package, as of a gate id.
const maxIdentLen = 128

// checkIdent says what is wrong with an identifier of a package (a step
// id, a slot name, the package's name and version, a gate it names), or
// "" if nothing: the rule of gate ids, 1 to 128 ASCII letters, digits,
// '_', '-' and '.' (extra names more characters, as '+' for a version).
// An identifier reaches every transition, receipt and report, so none may
// hold a control character, a bidi override, white space or anything else
// a terminal would not show as written.
func checkIdent(id, extra string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > maxIdentLen:
		return fmt.Sprintf("is longer than %d bytes", maxIdentLen)
	case !utf8.ValidString(id):
		return "is not valid UTF-8"
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' ||
			strings.ContainsRune(extra, r)) {
			allowed := "letters, digits, '_', '-', '.'"
			for _, c := range extra {
				allowed += fmt.Sprintf(", '%c'", c)
			}
			return fmt.Sprintf("holds %q; use %s", r, allowed)
		}
	}
	return ""
}

// checkPrintable says what is wrong with a name of a package that is not
// an identifier by the rule above but is printed as one (a file path, a
// JSON pointer, a field of the adjustable schema, a model name, a gate's
// subject), or "" if nothing: it may hold any printable text, and no
// character [textsafe.Escape] would escape.
func checkPrintable(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if !textsafe.Safe(string(r)) {
			return fmt.Sprintf("holds %q, which a terminal would not show as written", r)
		}
	}
	return ""
}

// checkNames refuses every name of a package [checkIdent] or
// [checkPrintable] refuses, beyond step ids (checkSpine) and gate ids
// (gate.Lint): what the runtime copies into the ledger, and reports print,
// must read the same on every terminal.
func checkNames(p *Package, add func(string, string, ...any)) {
	m, f := &p.Manifest, ManifestFile
	if m.Name != "" {
		if why := checkIdent(m.Name, ""); why != "" {
			add(f, "name %q %s", m.Name, why)
		}
	}
	if m.Version != "" {
		if why := checkIdent(m.Version, "+"); why != "" {
			add(f, "version %q %s", m.Version, why)
		}
	}
	for _, name := range sortedNames(m.Slots) {
		s := m.Slots[name]
		if why := checkIdent(name, ""); why != "" {
			add(f, "slot %q: name %s", name, why)
		}
		if s.Model != "" {
			if why := checkPrintable(s.Model); why != "" {
				add(f, "slot %q: model %q %s", name, s.Model, why)
			}
		}
		for _, ptr := range s.Projection {
			if why := checkPrintable(ptr); why != "" {
				add(f, "slot %q: projection %q %s", name, ptr, why)
			}
		}
		if s.Verifier != nil {
			for _, field := range s.Verifier.Files {
				if why := checkPrintable(field); why != "" {
					add(f, "slot %q: verifier field %q %s", name, field, why)
				}
			}
		}
	}
	if r := m.Repair; r != nil {
		for _, g := range r.Gates {
			if why := checkIdent(g, ""); why != "" {
				add(f, "repair: gate %q %s", g, why)
			}
		}
	}
	for i, s := range p.Spine.Steps {
		where := fmt.Sprintf("step %d (%q)", i, s.ID)
		if s.Report != "" {
			if why := checkPrintable(s.Report); why != "" {
				add(SpineFile, "%s: report %q %s", where, s.Report, why)
			}
		}
		for _, k := range sortedNames(s.Args) {
			if v, ok := s.Args[k].(string); ok && k != "template" {
				if why := checkPrintable(v); why != "" {
					add(SpineFile, "%s: %s %q %s", where, k, v, why)
				}
			}
		}
	}
	for _, g := range p.GateSpecs {
		if why := checkPrintable(g.Subject); why != "" {
			add(GatesFile, "gate %q: subject %q %s", g.ID, g.Subject, why)
		}
	}
	props, _ := p.AdjustRaw["properties"].(map[string]any)
	for _, name := range sortedNames(props) {
		if why := checkPrintable(name); why != "" {
			add(AdjustSchema, "field %q %s", name, why)
		}
	}
}

func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
