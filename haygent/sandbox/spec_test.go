package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestInvalidSpec(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	for name, s := range map[string]Spec{
		"no argv":        {Dir: dir},
		"empty argv0":    {Argv: []string{""}, Dir: dir},
		"NUL in argv":    {Argv: []string{"true", "a\x00b"}, Dir: dir},
		"no dir":         {Argv: []string{"true"}},
		"relative dir":   {Argv: []string{"true"}, Dir: "."},
		"missing dir":    {Argv: []string{"true"}, Dir: filepath.Join(dir, "missing")},
		"file as dir":    {Argv: []string{"true"}, Dir: file},
		"negative limit": {Argv: []string{"true"}, Dir: dir, Timeout: -1},
		"negative cap":   {Argv: []string{"true"}, Dir: dir, MaxOutput: -1},
		"empty key":      {Argv: []string{"true"}, Dir: dir, Env: map[string]string{"": "x"}},
		"= in key":       {Argv: []string{"true"}, Dir: dir, Env: map[string]string{"A=B": "x"}},
		"NUL in value":   {Argv: []string{"true"}, Dir: dir, Env: map[string]string{"A": "x\x00"}},
	} {
		res, err := Run(context.Background(), s)
		if !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("%s: err %v, want ErrInvalidSpec", name, err)
		}
		if res == nil || res.ExitCode != -1 || !res.Started.IsZero() {
			t.Errorf("%s: result %+v", name, res)
		}
	}
}
