package evidence_test

import (
	"fmt"
	"strings"

	"github.com/haygent/hg/haygent/evidence"
)

func ExampleParseTestReport() {
	out := `TAP version 14
1..3
ok 1 - parses empty input
not ok 2 - parses unicode
  ---
  message: 'identifier split at U+00E9'
  ...
ok 3 - caches results # SKIP no cache in CI
`
	r, err := evidence.ParseTestReport(evidence.FormatAuto, strings.NewReader(out))
	if err != nil {
		panic(err)
	}
	d := r.Data()
	fmt.Println(d["format"], d["ok"], d["total"], d["passed"], d["failed"], d["skipped"])
	fmt.Println(d["failed_cases"])
	// Output:
	// tap false 3 1 1 1
	// [parses unicode]
}

func ExampleTestReport_OK() {
	// The plan promised five tests; three ran and passed. No case failed,
	// but the report is not OK.
	r, _ := evidence.ParseTAP(strings.NewReader("1..5\nok 1\nok 2\nok 3\n"))
	fmt.Println(r.Failed, r.OK(), r.Problems)
	// Output:
	// 0 false [plan 1..5 but 3 tests ran]
}

func ExampleCoverageOf() {
	c := evidence.CoverageOf(evidence.KindApproval)
	fmt.Println(c.DoesNotEstablish[0])
	// Output:
	// that the subject is correct, safe or complete
}
