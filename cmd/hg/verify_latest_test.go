package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// verifyJSON runs hg verify --json with args and returns its report and
// exit code.
func verifyJSON(t *testing.T, hg func(args ...string) (string, string, int), args ...string) (verifyReport, int) {
	t.Helper()
	out, errOut, code := hg(append([]string{"verify", "--json"}, args...)...)
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify %v: exit %d, not JSON: %v\n%s%s", args, code, err, out, errOut)
	}
	return rep, code
}

// latestCheck returns the check "latest record" of the report's one run,
// or nil.
func latestCheck(t *testing.T, rep verifyReport) *checkReport {
	t.Helper()
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs in the report, want 1", len(rep.Runs))
	}
	for i, c := range rep.Runs[0].Checks {
		if c.Name == checkLatest {
			return &rep.Runs[0].Checks[i]
		}
	}
	return nil
}

// TestVerifyRecordNotLatest: hg verify of the CID of a run record that
// is no longer its run's latest (a recheck regressed a node since, or a
// person withdrew one) fails the check "latest record", naming the
// latest: the old record still says done, and every other check of it
// holds. The latest record's CID passes it; a record of a run this store
// does not have passes it and says so; hg verify RUN and a bundle,
// verified alone, have no such check.
func TestVerifyRecordNotLatest(t *testing.T) {
	s := newStanding(t)
	for _, c := range []struct{ run, before string }{{"run-reg", s.regBefore}, {"run-wd", s.wdBefore}} {
		latest, _ := runRecord(t, s.dir, c.run)
		rep, code := verifyJSON(t, s.hg, c.before)
		f := rep.FirstFailure
		if code != exitIntegrity || rep.OK || rep.Runs[0].Status != "done" || f == nil || f.Check != checkLatest ||
			f.Detail != "record "+c.before+" is not the latest record of run "+c.run+" ("+latest+" is): 'hg verify "+c.run+"' verifies the run as it stands" {
			t.Errorf("verify %s (%s before): exit %d, ok %v, first failure %+v", c.before, c.run, code, rep.OK, f)
		}
		out, errOut, code := s.hg("verify", c.before)
		if code != exitIntegrity || !strings.Contains(out, "FAIL  latest record") || !strings.HasSuffix(out, ": FAILED\n") ||
			!strings.Contains(errOut, "hg: error: verification failed: run "+c.run+": latest record: record "+c.before+" is not the latest") {
			t.Errorf("verify %s: exit %d\n%s%s", c.before, code, out, errOut)
		}
		rep, _ = verifyJSON(t, s.hg, latest)
		if lc := latestCheck(t, rep); lc == nil || !lc.OK || lc.Detail != "the latest record of run "+c.run {
			t.Errorf("verify %s (%s now): latest record check %+v", latest, c.run, lc)
		}
		rep, _ = verifyJSON(t, s.hg, c.run)
		if lc := latestCheck(t, rep); lc != nil {
			t.Errorf("verify %s: a check %+v; hg verify RUN has none", c.run, lc)
		}
	}

	forged := forgeRecordAs(t, s.dir, s.regBefore, "run-20991231-235959-eeeeeeeeeeee")
	rep, code := verifyJSON(t, s.hg, forged)
	if lc := latestCheck(t, rep); code != 0 || lc == nil || !lc.OK || !strings.Contains(lc.Detail, "run run-20991231-235959-eeeeeeeeeeee is not a run of this store") {
		t.Errorf("verify a record of no run here: exit %d, latest record check %+v", code, lc)
	}

	car := filepath.Join(t.TempDir(), "old.car")
	if out, errOut, code := s.hg("bundle", "export", s.regBefore, "-o", car); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	rep, code = verifyJSON(t, s.hg, "--bundle", car, "--key", s.oldPub)
	if lc := latestCheck(t, rep); code != 0 || lc != nil {
		t.Errorf("verify --bundle: exit %d, latest record check %+v; a bundle is verified alone", code, lc)
	}
}
