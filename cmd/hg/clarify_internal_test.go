package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/haygent/hg/belief"
	"github.com/haygent/hg/dag"
)

// On a terminal each open question is asked until the answer is allowed:
// JSON when it reads as JSON, else the text as a string.
func TestAskOnTerminal(t *testing.T) {
	wo, err := dag.Parse([]byte(`{"workorder": "w", "objective": "o",
	  "decisions": {
	    "os": {"question": "Which OS?", "allowed": ["linux", "darwin"], "critical": true, "into": [{"node": "n", "pointer": "/os"}]},
	    "days": {"question": "How many days?", "schema": {"type": "integer"}, "critical": true, "into": [{"node": "n", "pointer": "/days"}]}
	  },
	  "nodes": {"n": {"haygent": "h"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, open := belief.Clarify(wo, nil)
	var stderr bytes.Buffer
	g := &globals{ui: &ui{stdin: strings.NewReader("seven\n7\nwindows\nlinux\n"), stderr: &stderr}}
	if err := askOnTerminal(g, open); err != nil {
		t.Fatal(err)
	}
	if open[0].Value != int64(7) || open[1].Value != "linux" || open[0].Source != belief.SourceTerminal || !open[1].Asked {
		t.Fatalf("answers %+v, %+v", open[0], open[1])
	}
	out := stderr.String()
	for _, want := range []string{"? How many days? (days): ", "does not satisfy", "? Which OS? (os) (one of \"linux\" or \"darwin\"): ", `"windows" is not one of`} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal shows %q, without %q", out, want)
		}
	}
	// No more input: the question stays open, exit 5.
	_, open = belief.Clarify(wo, nil)
	g.ui.stdin = strings.NewReader("")
	if err := askOnTerminal(g, open); exitCode(err) != exitNeedInput {
		t.Fatalf("answers ran out: %v", err)
	}
}
