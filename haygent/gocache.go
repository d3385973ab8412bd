package haygent

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/haygent/hg/haygent/sandbox"
)

// Exec steps share one Go build cache, which they may only read: a step
// that could write it could plant a compiled package that a later step
// then links into the program it tests. A step sees it through an overlay
// (sandbox.Overlay): what the step compiles goes to a layer of its own,
// thrown away with its scratch directory. The cache is filled by the
// runtime alone, before a step that runs the go command, by compiling the
// standard-library packages the step's module needs. Compiling executes
// none of the workspace's code: `go list` reads its go.mod and imports,
// and `go build` compiles only standard packages. Whatever else a step
// compiles it compiles for itself, each time.

// goBuildVerbs are the go subcommands whose steps the cache is warmed for.
var goBuildVerbs = []string{"build", "test", "vet", "run", "install"}

// warmGoCache fills the shared Go build cache, the directory cache, for
// step, if step runs the go command, under the step's own confinement but
// for the cache, which it may write. It is best effort: a failure leaves the step to compile
// for itself, and records nothing, since the step's evidence does not
// depend on it.
func (r *runner) warmGoCache(step sandbox.Spec, cache string) {
	if len(step.Argv) < 2 || filepath.Base(step.Argv[0]) != "go" || !slices.Contains(goBuildVerbs, step.Argv[1]) {
		return
	}
	warm := step
	warm.NetCheck, warm.NoNetwork, warm.Secrets, warm.Stdin, warm.Overlays = nil, true, nil, nil, nil
	warm.Env = sandbox.DefaultEnv(map[string]string{"GOCACHE": cache})
	for _, k := range []string{"HOME", "TMPDIR", "GOMODCACHE", "GOPATH"} {
		warm.Env[k] = step.Env[k]
	}
	warm.Write = append(slices.Clone(step.Write), cache)
	warm.Argv = []string{"go", "list", "-deps", "-test", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}", "./..."}
	res, err := sandbox.Run(r.work, warm)
	if err != nil || res.ExitCode != 0 {
		return
	}
	pkgs := strings.Fields(string(res.Stdout))
	if len(pkgs) == 0 {
		return
	}
	for _, p := range pkgs {
		if strings.HasPrefix(p, "-") {
			return
		}
	}
	warm.Argv = append([]string{"go", "build"}, pkgs...)
	sandbox.Run(r.work, warm)
}
