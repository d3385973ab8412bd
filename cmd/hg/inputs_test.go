package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// -j takes a number of nodes (or invocations) of at least one: 0 and -1
// are usage errors naming the flag, before anything is read or run, for
// hg run (dry run too), hg resume and hg worker.
func TestJobsAtLeastOne(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	if code := runHG(t, nil, "--store", store, "init"); code != 0 {
		t.Fatal("init failed")
	}
	wo, _ := filepath.Abs("../../fixtures/workorders/pipeline.json")
	for _, j := range []string{"0", "-1"} {
		for _, args := range [][]string{
			{"run", "-j", j, wo},
			{"run", "--dry-run", "-j", j, wo},
			{"resume", "-j", j, "run-none"},
			{"worker", "--nats", "nats://127.0.0.1:1", "-j", j},
		} {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append([]string{"--store", store}, args...), nil, &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), "-j") {
				t.Errorf("hg %s: exit %d, %q; want exit 2 naming -j", strings.Join(args, " "), code, stderr.String())
			}
		}
	}
}
