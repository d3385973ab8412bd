package evidence_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent/evidence"
)

func TestCoverage(t *testing.T) {
	kinds := []string{
		evidence.KindApproval, evidence.KindDigest, evidence.KindExit, evidence.KindFile,
		evidence.KindHTTP, evidence.KindMutation, evidence.KindRead, evidence.KindTestReport,
	}
	slices.Sort(kinds)
	if got := evidence.Kinds(); !slices.Equal(got, kinds) {
		t.Errorf("Kinds() = %q, want %q", got, kinds)
	}
	for _, k := range kinds {
		c := evidence.CoverageOf(k)
		if len(c.Establishes) == 0 || len(c.DoesNotEstablish) == 0 {
			t.Errorf("%s: empty coverage %+v", k, c)
		}
		checkData(t, c.Data())
	}

	// What the brief of each kind promises to say.
	for kind, phrases := range map[string][]string{
		evidence.KindExit:       {"time limit", "output is correct", "did not report"},
		evidence.KindTestReport: {"untested code", "test the right thing", "not run"},
		evidence.KindDigest:     {"hash", "mean"},
		evidence.KindFile:       {"existed", "digest", "when the runtime observed it"},
		evidence.KindApproval:   {"named person", "correct", "expired"},
	} {
		c := evidence.CoverageOf(kind)
		all := strings.Join(c.Establishes, "\n") + "\n" + strings.Join(c.DoesNotEstablish, "\n")
		for _, p := range phrases {
			if !strings.Contains(all, p) {
				t.Errorf("%s coverage does not mention %q", kind, p)
			}
		}
	}

	// The caller owns the slices.
	c := evidence.CoverageOf(evidence.KindExit)
	c.Establishes[0] = "everything"
	if evidence.CoverageOf(evidence.KindExit).Establishes[0] == "everything" {
		t.Error("CoverageOf returned shared slices")
	}

	// An unknown kind establishes nothing.
	u := evidence.CoverageOf("vibes")
	if len(u.Establishes) != 0 || len(u.DoesNotEstablish) != 1 || !strings.Contains(u.DoesNotEstablish[0], `vibes`) {
		t.Errorf("unknown kind: %+v", u)
	}
}
