package gate_test

import (
	"fmt"
	"time"

	"github.com/haygent/hg/haygent/gate"
)

func ExampleGate_Evaluate() {
	specs, err := gate.Parse([]byte(`{"gates": [
	  {"id": "TEST_PASS", "evidence": "test_report", "subject": "step:test",
	   "predicate": "ev.total > 0 && ev.failed == 0",
	   "max_age": "10m",
	   "on_missing": "fail", "on_stale": "fail", "on_invalid": "fail",
	   "on_contradictory": "halt", "on_timeout": "fail"}
	]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := gate.Compile(specs[0])
	if err != nil {
		fmt.Println(err)
		return
	}

	ran := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	report := gate.Evidence{
		Ref: "bafyreport", Kind: "test_report", Subject: "step:test", ObservedAt: ran,
		Data: map[string]any{"total": int64(42), "failed": int64(0)},
	}
	crashed := gate.Evidence{
		Ref: "bafyexit", Kind: "exit", Subject: "step:test", ObservedAt: ran,
		Data: map[string]any{"code": int64(2)},
	}
	env := gate.Env{Now: ran.Add(time.Minute)}

	show := func(r gate.Result) { fmt.Println(r.Verdict, r.Action, r.Read) }
	show(g.Evaluate([]gate.Evidence{report}, env))
	show(g.Evaluate([]gate.Evidence{report, crashed}, env))
	show(g.Evaluate(nil, env))
	show(g.Evaluate([]gate.Evidence{report}, gate.Env{Now: ran.Add(time.Hour)}))
	show(g.Evaluate([]gate.Evidence{report}, gate.Env{
		Now:        ran.Add(time.Minute),
		LastChange: map[string]time.Time{"step:test": ran.Add(time.Second)},
	}))
	// Output:
	// PASS pass [bafyreport]
	// CONTRADICTORY halt [bafyreport bafyexit]
	// MISSING fail []
	// STALE fail [bafyreport]
	// STALE fail [bafyreport]
}
