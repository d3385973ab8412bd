package haygent

import (
	"os/exec"
	"path/filepath"
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
// PATH: its GOROOT. The toolchain is found once.
func toolchainPaths() []string {
	toolchain.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			return
		}
		if real, err := filepath.EvalSymlinks(goBin); err == nil {
			goBin = real
		}
		if abs, err := filepath.Abs(goBin); err == nil {
			toolchain.paths = []string{filepath.Dir(filepath.Dir(abs))}
		}
	})
	return append([]string(nil), toolchain.paths...)
}
