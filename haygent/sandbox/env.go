package sandbox

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultPath is the PATH of [DefaultEnv], and the PATH against which
// Argv[0] is resolved when [Spec.Env] has none.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// DefaultEnv returns the base environment of a step, as the package
// documentation lists it (Environment), with extra's entries added on top:
// an entry of extra replaces a default one. Nothing is taken from the
// parent's environment except where the parent's `go` lives, found with
// [exec.LookPath]. The result is a new map the caller may change.
//
// DefaultEnv sets no HOME, TMPDIR, GOCACHE, GOMODCACHE or GOPATH: the
// caller passes those in extra.
func DefaultEnv(extra map[string]string) map[string]string {
	path := DefaultPath
	if goBin, err := exec.LookPath("go"); err == nil {
		if abs, err := filepath.Abs(goBin); err == nil {
			dir := filepath.Dir(abs)
			if !slices.Contains(filepath.SplitList(path), dir) {
				path = dir + string(os.PathListSeparator) + path
			}
		}
	}
	env := map[string]string{
		"PATH":        path,
		"LANG":        "C.UTF-8",
		"GOTOOLCHAIN": "local",
		"GOPROXY":     "off",
	}
	maps.Copy(env, extra)
	return env
}

// nsMode is the kind of network isolation a run gets.
type nsMode int

const (
	nsNone         nsMode = iota
	nsNet                 // a new network namespace
	nsUserNet             // a new network namespace in a new user namespace
	nsConfined            // new PID, mount and network namespaces
	nsUserConfined        // new PID, mount and network namespaces in a new user namespace
)

func (m nsMode) isolation() []string {
	switch m {
	case nsNet:
		return []string{"netns"}
	case nsUserNet:
		return []string{"netns", "userns"}
	case nsConfined:
		return []string{"pidns", "mntns", "procfs", "netns", "ipcns", "utsns"}
	case nsUserConfined:
		return []string{"userns", "pidns", "mntns", "procfs", "netns", "ipcns", "utsns"}
	}
	return nil
}

func (m nsMode) String() string {
	if m == nsNone {
		return "none"
	}
	return strings.Join(m.isolation(), "+")
}
