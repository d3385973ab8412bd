package sandbox

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestDefaultEnv(t *testing.T) {
	env := DefaultEnv(map[string]string{"HOME": "/h", "GOPROXY": "direct"})
	for k, want := range map[string]string{"LANG": "C.UTF-8", "GOTOOLCHAIN": "local", "GOPROXY": "direct", "HOME": "/h"} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	if len(env) != 5 {
		t.Errorf("env %q has extra entries", env)
	}
	dirs := filepath.SplitList(env["PATH"])
	if !slices.Equal(dirs[len(dirs)-3:], filepath.SplitList(DefaultPath)) {
		t.Errorf("PATH %q does not end with %q", env["PATH"], DefaultPath)
	}
	if goBin, err := exec.LookPath("go"); err == nil {
		abs, _ := filepath.Abs(goBin)
		if !slices.Contains(dirs, filepath.Dir(abs)) {
			t.Errorf("PATH %q lacks the go command's directory %q", env["PATH"], filepath.Dir(abs))
		}
	}

	t.Setenv("HG_PARENT_SECRET", "x")
	if _, ok := DefaultEnv(nil)["HG_PARENT_SECRET"]; ok {
		t.Error("parent environment leaked")
	}
}
