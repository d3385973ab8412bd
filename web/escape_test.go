package web

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/metrics"
)

// hostile is what a forged ledger, record or tree holds to run script in
// the page or break out of the context it lands in: element text, an
// attribute (quoted or not), a URL, the text of an SVG element, an RCDATA
// element (title).
const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(2)>' onmouseover='alert(3)</title><svg onload=alert(4)>javascript:alert(5)`

var (
	tagRE     = regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9]*)([^>]*)>`)
	quotedRE  = regexp.MustCompile(`"[^"]*"`)
	handlerRE = regexp.MustCompile(`(?i)(^|\s)on[a-z]+\s*=`)
	// templateTags are the elements the templates write.
	templateTags = map[string]bool{"html": true, "head": true, "meta": true, "title": true, "link": true, "script": true, "body": true,
		"nav": true, "a": true, "main": true, "footer": true, "h1": true, "h2": true, "h3": true, "p": true, "form": true, "label": true,
		"select": true, "option": true, "button": true, "input": true, "table": true, "thead": true, "tbody": true, "tr": true, "th": true, "td": true,
		"span": true, "div": true, "code": true, "pre": true, "dl": true, "dt": true, "dd": true, "section": true, "details": true,
		"summary": true, "ul": true, "ol": true, "li": true, "svg": true, "line": true, "rect": true, "g": true, "text": true}
)

// TestPagesEscapeEveryField renders every page with the hostile string
// in every field a record can set, and checks that no tag, attribute or
// scheme of it survives: each appears only escaped.
func TestPagesEscapeEveryField(t *testing.T) {
	pages, err := parsePages()
	if err != nil {
		t.Fatal(err)
	}
	h := hostile
	verdict := Verdict{Kind: BrokenKind, Text: "broken: " + h, Status: h}
	rv := &receiptView{CID: h, Verdict: verdict, Checks: []verify.Check{{Name: h, Detail: h}},
		Haygent: h, Objective: h, Run: h, Started: h, Finished: h, Package: h, Input: h, Output: h, Workspace: h, Final: h, Permissions: h,
		Used: []string{h}, Denied: []ledger.Denied{{Verb: h, Kind: h, Target: h, Rule: h}},
		Halt: &haltView{FailedGate: h, Verdict: h, Reason: h, RestartPoint: h, LastEvidence: []string{h}, Preserved: []artifactView{{Path: h, File: h, Digest: h}}},
		Transitions: []transitionView{{Step: h, Kind: h, Status: h, Note: h, Started: h, Finished: h,
			Evidence: []evidenceView{{CID: h, Kind: h, Subject: h, ObservedAt: h, Data: []kv{{h, h}}, Establishes: []string{h}, DoesNot: []string{h}}},
			Slots:    []slotView{{Slot: h, Adapter: h, Model: h, Verdict: h, Errors: []string{h}, Response: h, ResponseCID: h}},
			Gates:    []gateView{{Gate: h, Predicate: h, Verdict: h, Action: h, Reason: h, At: h}},
			Denied:   []ledger.Denied{{Verb: h, Kind: h, Target: h, Rule: h}}}},
		Artifacts: []artifactView{{Path: h, File: h, Digest: h}}, Limitations: []string{h}, Replay: h, Upstream: []receiptLink{{CID: h, Verdict: verdict}},
		Logs: []logView{{Step: h, Argv: []string{h}, Streams: []streamView{{Name: h, CID: h, Text: h, Error: h}}}},
	}
	graph := svgGraph{W: 10, H: 10, Nodes: []svgNode{{Name: h, State: h, Href: h, Label: h}}}
	compact := svgGraph{W: 10, H: 10, Compact: true, Nodes: []svgNode{{Name: h, State: h, Href: h}}}
	cases := map[string]any{
		"error": errorData{pageData: pageData{Title: h}, Message: h},
		"runs": runsData{pageData: pageData{Title: h}, Status: h, Class: h, Statuses: []string{h}, Classes: []string{h},
			Runs: []runRow{{Run: h, WorkOrder: h, Class: h, Status: h, Reason: h, Started: h, Took: h, Error: h}}},
		"run": runData{pageData: pageData{Title: h}, Run: h, Name: h, Objective: h, Status: h, Reason: h, Started: h, Updated: h, Class: h,
			Record: h, WorkOrder: h, Require: []string{h}, Mandatory: []string{h}, LiveURL: h, Trusted: []string{h},
			Decisions: []decisionRow{{Slot: h, Question: h, Value: h, Source: "belief", Event: h}},
			Events:    []eventRow{{At: h, Node: h, Kind: h, From: h, To: h, Who: h, Reason: h}},
			Graph:     graph, Counts: []stateCount{{State: h, N: 1}}, Verified: true, VerifyProblem: h,
			Nodes: []nodeRow{{Name: h, State: h, Reason: h, Receipt: h, Href: h, Verdict: &verdict}}},
		"run-compact":        runData{Run: h, Graph: compact},
		"node":               nodeData{pageData: pageData{Title: h}, Run: h, Node: h, State: h, Reason: h, Problem: h, BlockedBy: &receiptLink{CID: h, Verdict: verdict}, Earlier: []receiptLink{{CID: h, Verdict: verdict}}, Receipt: rv, RunHref: h},
		"receipt":            receiptData{pageData: pageData{Title: h}, Receipt: rv},
		"receipt-unreadable": receiptData{Receipt: &receiptView{CID: h, Verdict: verdict, LedgerError: h}},
		"tree": treeData{pageData: pageData{Title: h}, Root: h, Path: h, Crumbs: []crumb{{Name: h, Href: h}, {Name: h, Href: h}},
			Entries: []treeEntry{{Name: h, Kind: "dir", Href: h}, {Name: h, Kind: "file", Download: h}, {Name: h, Kind: "symlink", Target: h}}},
		"beliefs": beliefData{pageData: pageData{Title: h}, Classes: []string{h}},
		"metrics": metricsData{pageData: pageData{Title: h}, Since: h, Columns: []string{h},
			Haygents: []metricsGroup{{Name: h, Package: h, Cells: []string{h}}}, Classes: []metricsGroup{{Name: h, Runs: h, Done: h, RunToVerified: h, Cells: []string{h}}},
			Total: metricsGroup{Cells: []string{h}}, UnverifiedBy: []kv{{h, h}},
			Report: &metrics.Report{Since: h, Runs: metrics.RunCounts{Unreadable: []metrics.RunProblem{{Run: h, Check: h, Detail: h}}, Unverified: []metrics.RunProblem{{Run: h, Check: h, Detail: h}}},
				NotMeasured: []metrics.NotMeasured{{Metric: h, Reason: h}}}},
		"belief": beliefData{pageData: pageData{Title: h}, Class: h, Events: []beliefRow{{CID: h, Slot: h, Op: h, Value: h, Cause: h, Why: h, At: h}},
			Bindings: []bindingRow{{Slot: h, Value: h, Event: h}}},
	}
	for name, data := range cases {
		tmpl := strings.Split(name, "-")[0]
		var buf bytes.Buffer
		if err := pages.ExecuteTemplate(&buf, tmpl, data); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out := buf.String()
		for _, bad := range []string{"<script>alert", "<img", "<svg onload", `href="javascript:`, `href='javascript:`} {
			if i := strings.Index(out, bad); i >= 0 {
				t.Errorf("%s: the page holds %q unescaped: ...%s...", name, bad, out[max(0, i-80):min(len(out), i+80)])
			}
		}
		// Every tag is the template's: none the hostile text opened, and
		// no event handler attribute outside a quoted value.
		for _, m := range tagRE.FindAllStringSubmatch(out, -1) {
			tag, attrs := strings.ToLower(m[1]), quotedRE.ReplaceAllString(m[2], `""`)
			if !templateTags[tag] {
				t.Errorf("%s: a <%s> tag: %s", name, tag, m[0])
			}
			if handlerRE.MatchString(attrs) || strings.ContainsAny(attrs, "'<") {
				t.Errorf("%s: an attribute escaped its quotes: %s", name, m[0])
			}
		}
		if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the hostile text is not shown escaped", name)
		}
		// The only scripts are the server's own; no event handler
		// attribute appears anywhere.
		if n := strings.Count(out, "<script"); n != 1 || !strings.Contains(out, `<script src="/static/live.js" defer></script>`) {
			t.Errorf("%s: %d script elements", name, n)
		}
	}
}

// TestStateClass: a state a record invents never becomes a class name of
// its choosing.
func TestStateClass(t *testing.T) {
	for in, want := range map[string]string{"done": "s-done", "failed": "s-failed", "done x": "s-other", `" onclick="x`: "s-other", "": "s-other"} {
		if got := stateClass(in); got != want {
			t.Errorf("stateClass(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVerdictOf: the three verdicts, a broken check winning over an
// untrusted signer, and PASS only beside verified.
func TestVerdictOf(t *testing.T) {
	ok := func(name string) verify.Check { return verify.Check{Name: name, OK: true} }
	bad := func(name, detail string) verify.Check { return verify.Check{Name: name, Detail: detail} }
	cases := []struct {
		name       string
		v          *verify.Verification
		kind, text string
		status     string
	}{
		{"verified", &verify.Verification{Status: "PASS", Checks: []verify.Check{ok(verify.CheckBlocks), ok(verify.CheckTrust)}}, Verified, "verified", "PASS"},
		{"verified halt", &verify.Verification{Status: "HALT", Checks: []verify.Check{ok(verify.CheckBlocks)}}, Verified, "verified", "HALT"},
		{"untrusted", &verify.Verification{Status: "PASS", Checks: []verify.Check{ok(verify.CheckBlocks), bad(verify.CheckTrust, "ed25519:x is not trusted")}}, Untrusted, "signer not trusted", notEstablished},
		{"broken after untrusted", &verify.Verification{Status: "PASS", Checks: []verify.Check{bad(verify.CheckTrust, "x"), bad(verify.CheckChain, "transition bafy... missing")}},
			BrokenKind, "broken: transition chain: transition bafy... missing", notEstablished},
		{"broken", &verify.Verification{Status: "PASS", Checks: []verify.Check{bad(verify.CheckBlocks, "bafyX does not hash to its CID")}}, BrokenKind, "broken: block hashes: bafyX does not hash to its CID", notEstablished},
		{"no checks", &verify.Verification{Status: "PASS"}, BrokenKind, "broken: not verified", notEstablished},
		{"nil", nil, BrokenKind, "broken: not verified", notEstablished},
		{"forged status", &verify.Verification{Status: "PASS<b>", Checks: []verify.Check{ok(verify.CheckBlocks)}}, Verified, "verified", notEstablished},
	}
	for _, c := range cases {
		got := verdictOf(c.v)
		if got.Kind != c.kind || got.Text != c.text || got.Status != c.status {
			t.Errorf("%s: got %+v, want %s / %q / %q", c.name, got, c.kind, c.text, c.status)
		}
	}
}
