package haygent

import (
	"path"
	"strings"

	"github.com/haygent/hg/haygent/perm"
)

// checkReportPaths refuses an exec step whose report file another step can
// write before it: a builtin op that writes a file (write_file, as the op
// table says) puts there whatever its template or its source (a slot's
// answer, the input) says, and the runtime would then refuse the report as
// not the command's work.
func checkReportPaths(p *Package, add func(string, string, ...any)) {
	for i, s := range p.Spine.Steps {
		if s.Kind != StepExec {
			continue
		}
		_, file, _ := strings.Cut(s.Report, ":")
		if file == "" {
			continue
		}
		want := path.Clean(file)
		for j, w := range p.Spine.Steps {
			op, ok := builtinOpNamed(w.Op)
			if w.Kind != StepBuiltin || !ok || op.writes == "" {
				continue
			}
			target, _ := w.Args[op.writes].(string)
			if target != "" && path.Clean(target) == want {
				add(SpineFile, "step %d (%q): report file %q is written by step %d (%q, %s): a report is evidence only when the step's own command writes it",
					i, s.ID, file, j, w.ID, w.Op)
			}
		}
	}
}

// checkScopes refuses outputs and covers globs that do not parse, and on
// steps other than exec, whose evidence vouches for no workspace.
func checkScopes(p *Package, add func(string, string, ...any)) {
	for i, s := range p.Spine.Steps {
		for _, f := range []struct {
			name  string
			globs []string
		}{{"outputs", s.Outputs}, {"covers", s.Covers}} {
			if len(f.globs) > 0 && s.Kind != StepExec {
				add(SpineFile, "step %d (%q): %s is for exec steps", i, s.ID, f.name)
			}
			for _, g := range f.globs {
				if _, err := perm.ParseGlob(g); err != nil {
					add(SpineFile, "step %d (%q): %s %q: %v", i, s.ID, f.name, g, err)
				}
			}
		}
	}
}
