package haygent

import "testing"

// A Haygent or an invocation that requires isolation never runs a step
// unisolated, whatever the runner allows.
func TestMayRunUnisolated(t *testing.T) {
	for _, c := range []struct {
		allow, require bool
		manifest       string
		want           bool
	}{
		{false, false, "", false},
		{true, false, "", true},
		{true, true, "", false},
		{true, false, IsolationRequired, false},
		{false, false, IsolationRequired, false},
	} {
		r := &runner{pkg: &Package{Manifest: Manifest{Isolation: c.manifest}}, opts: Options{AllowUnisolated: c.allow, RequireIsolation: c.require}}
		if got := r.mayRunUnisolated(); got != c.want {
			t.Errorf("allow %v, require %v, manifest %q: %v, want %v", c.allow, c.require, c.manifest, got, c.want)
		}
	}
}

func TestManifestIsolationValues(t *testing.T) {
	for v, ok := range map[string]bool{"": true, IsolationRequired: true, "sometimes": false, "Required": false} {
		var problems []string
		checkManifest(&Manifest{Isolation: v}, func(_ string, format string, args ...any) { problems = append(problems, format) })
		found := false
		for _, p := range problems {
			if p == "isolation %q: want %q or nothing" {
				found = true
			}
		}
		if found == ok {
			t.Errorf("isolation %q: refused %v, want %v", v, found, !ok)
		}
	}
}
