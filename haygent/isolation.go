package haygent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// IsolationRequired is the manifest's isolation value that forbids
// running exec steps without their whole confinement.
const IsolationRequired = "required"

// mayRunUnisolated reports whether an exec step may run with less than
// its whole confinement where the machine cannot give it: only when the
// runner allows it and neither the Haygent nor the invocation requires
// isolation.
func (r *runner) mayRunUnisolated() bool {
	return r.opts.AllowUnisolated && !r.opts.RequireIsolation && r.pkg.Manifest.Isolation != IsolationRequired
}

// unisolatedHint says what a refused step could do about it.
func (r *runner) unisolatedHint() string {
	switch {
	case r.pkg.Manifest.Isolation == IsolationRequired:
		return "; the Haygent requires isolation, so it cannot run on this machine"
	case r.opts.RequireIsolation:
		return "; the invocation requires isolation, so it cannot run on this machine"
	}
	return "; --allow-unisolated runs it anyway, with the receipt saying what was missing"
}

var toolchain struct {
	once  sync.Once
	paths []string
}

// toolchainPaths returns what exec steps may read of the Go toolchain on
// PATH: its GOROOT, as `go env GOROOT` names it, if that holds a
// toolchain (pkg/tool). The toolchain is found once.
func toolchainPaths() []string {
	toolchain.once.Do(func() {
		// The go command says where its GOROOT is; the directory above
		// the go on PATH need not be one (a wrapper in a home directory).
		goBin, err := exec.LookPath("go")
		if err != nil {
			return
		}
		cmd := exec.Command(goBin, "env", "GOROOT")
		cmd.Env = []string{"PATH=" + filepath.Dir(goBin), "GOTOOLCHAIN=local", "HOME=/nonexistent"}
		out, err := cmd.Output()
		root := strings.TrimSpace(string(out))
		if err != nil || !filepath.IsAbs(root) || root == "/" {
			return
		}
		if fi, err := os.Stat(filepath.Join(root, "pkg", "tool")); err == nil && fi.IsDir() {
			toolchain.paths = []string{filepath.Clean(root)}
		}
	})
	return append([]string(nil), toolchain.paths...)
}
