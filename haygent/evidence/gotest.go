package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// goEvent is one test2json event (go doc cmd/test2json), with the fields
// go test -json adds for builds (Go 1.24).
type goEvent struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string // package fail caused by a build failure
}

type goKey struct{ pkg, test string }

// goTest is a test that has started and not yet ended.
type goTest struct {
	order int
	out   textBuf
}

// goPackage is what is known about one package of the stream.
type goPackage struct {
	order       int
	final       string // "pass", "fail", "skip", or "" while running
	failedBuild string
	failed      int // failed cases counted in this package
	out         textBuf
}

// goParser holds the state of one ParseGoTestJSON call.
type goParser struct {
	b         *builder
	events    int
	order     int
	tests     map[goKey]*goTest
	pkgs      map[string]*goPackage
	builds    map[string]*textBuf // build output by import path
	buildFail []string            // import paths whose build failed, in order
	text      []string            // the current run of non-JSON lines
	textLines int
	textStart int
	firstText string
}

// ParseGoTestJSON reads the output of go test -json (or go tool test2json)
// and counts its test cases; see the package documentation for how
// subtests, benchmarks and package failures are counted.
//
// It returns an error only when the reader fails or no JSON event arrives at
// all. Non-JSON lines, malformed events, unfinished tests and packages, and
// build failures become Problems.
func ParseGoTestJSON(r io.Reader) (*TestReport, error) {
	cr := newCapReader(r)
	p := &goParser{
		b:      newBuilder(FormatGoTestJSON),
		tests:  map[goKey]*goTest{},
		pkgs:   map[string]*goPackage{},
		builds: map[string]*textBuf{},
	}
	lr := newLineReader(cr)
	for {
		line, long, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("evidence: read go test -json output: %w", err)
		}
		p.line(lr.n, line, long)
	}
	p.flushText()
	if p.events == 0 {
		if p.firstText != "" {
			return nil, fmt.Errorf("evidence: parse go test -json output: %w: no JSON event; first line: %q", ErrNoReport, p.firstText)
		}
		return nil, fmt.Errorf("evidence: parse go test -json output: %w: no JSON event", ErrNoReport)
	}
	p.end()
	return p.b.finish(cr), nil
}

func (p *goParser) line(n int, line []byte, long bool) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 {
		return
	}
	if trimmed[0] != '{' {
		text := clean(string(trimmed[:min(len(trimmed), 400)]), 200)
		if p.firstText == "" {
			p.firstText = text
		}
		if p.textLines == 0 {
			p.textStart = n
		}
		p.textLines++
		if len(p.text) < 10 {
			p.text = append(p.text, text)
		}
		return
	}
	p.flushText()
	if long {
		p.b.problem("line %d: event longer than %d bytes, ignored", n, MaxLineSize)
		return
	}
	var ev goEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		p.b.problem("line %d: invalid JSON event: %v", n, err)
		return
	}
	if ev.Action == "" {
		p.b.problem("line %d: JSON without an Action, not a test2json event", n)
		return
	}
	p.events++
	p.event(&ev)
}

// flushText turns the current run of non-JSON lines into one Problem.
func (p *goParser) flushText() {
	if p.textLines == 0 {
		return
	}
	msg := strings.Join(p.text, " | ")
	if p.textLines > len(p.text) {
		msg += fmt.Sprintf(" | ... (%d lines)", p.textLines)
	}
	p.b.problem("non-JSON output at line %d: %s", p.textStart, msg)
	p.text, p.textLines = p.text[:0], 0
}

func (p *goParser) pkg(name string) *goPackage {
	g := p.pkgs[name]
	if g == nil {
		p.order++
		g = &goPackage{order: p.order, out: textBuf{max: MaxMessageSize}}
		p.pkgs[name] = g
	}
	return g
}

func (p *goParser) event(ev *goEvent) {
	switch ev.Action {
	case "build-output":
		out := p.builds[ev.ImportPath]
		if out == nil {
			out = &textBuf{max: MaxMessageSize}
			p.builds[ev.ImportPath] = out
		}
		out.WriteString(ev.Output)
		return
	case "build-fail":
		if !slices.Contains(p.buildFail, ev.ImportPath) {
			p.buildFail = append(p.buildFail, ev.ImportPath)
		}
		return
	}
	g := p.pkg(ev.Package)
	if ev.Test == "" {
		p.packageEvent(g, ev)
		return
	}
	key := goKey{ev.Package, ev.Test}
	switch ev.Action {
	case "run":
		if p.tests[key] == nil {
			p.order++
			p.tests[key] = &goTest{order: p.order, out: textBuf{max: MaxMessageSize}}
		}
	case "output":
		if t := p.tests[key]; t != nil && !isGoFraming(ev.Output) {
			t.out.WriteString(ev.Output)
		}
	case "pass", "skip", "fail", "bench":
		t := p.tests[key]
		delete(p.tests, key)
		if ev.Action == "bench" || (isBenchmark(ev.Test) && ev.Action != "fail") {
			return
		}
		c := Case{Name: ev.Test, Suite: ev.Package, Status: ev.Action, Duration: seconds(ev.Elapsed)}
		if t != nil && ev.Action != "pass" {
			c.Message = t.out.String()
		}
		p.addCase(g, c)
	}
}

func (p *goParser) addCase(g *goPackage, c Case) {
	if c.Status == StatusFail {
		g.failed++
	}
	p.b.add(c)
}

func (p *goParser) packageEvent(g *goPackage, ev *goEvent) {
	switch ev.Action {
	case "start": // a package's first event; a new run if it was seen before
		g.final, g.failedBuild, g.failed = "", "", 0
		g.out = textBuf{max: MaxMessageSize}
	case "output":
		if !isGoNoise(ev.Output) {
			g.out.WriteString(ev.Output)
		}
	case "pass", "fail", "skip":
		p.unfinished(ev.Package, false, "the package ended first (timeout or crash)")
		g.final = ev.Action
		g.failedBuild = ev.FailedBuild
		if ev.Action == "fail" && g.failed == 0 {
			p.packageFailure(ev.Package, g, ev.Elapsed)
		}
	}
}

// packageFailure counts a package that failed without a failing case as a
// failed pseudo-case.
func (p *goParser) packageFailure(name string, g *goPackage, elapsed float64) {
	c := Case{Name: name + " (package)", Status: StatusFail, Duration: seconds(elapsed)}
	switch {
	case g.final == "":
		c.Message = "no final result: the stream ended before the package finished\n" + g.out.String()
		p.b.problem("package %s: no final result (stream truncated?)", name)
	case g.failedBuild != "":
		out := ""
		if b := p.builds[g.failedBuild]; b != nil {
			out = b.String()
		}
		c.Message = "build failed: " + g.failedBuild + "\n" + out
		p.b.problem("package %s: build failed (%s): %s", name, g.failedBuild, firstBuildError(out))
	default:
		c.Message = g.out.String()
		p.b.problem("package %s failed with no failing test: %s", name, firstLine(c.Message, 200))
	}
	p.addCase(g, c)
}

// unfinished counts the tests of pkg (of every package if all) that
// started and never ended as failed.
func (p *goParser) unfinished(pkg string, all bool, why string) {
	var keys []goKey
	for k := range p.tests {
		if all || k.pkg == pkg {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b goKey) int { return p.tests[a].order - p.tests[b].order })
	for _, k := range keys {
		t := p.tests[k]
		delete(p.tests, k)
		if isBenchmark(k.test) {
			continue // test2json never ends a benchmark that passed
		}
		p.b.problem("package %s: test %s started but never finished: %s", k.pkg, k.test, why)
		p.addCase(p.pkg(k.pkg), Case{Name: k.test, Suite: k.pkg, Status: StatusFail,
			Message: "started but never finished: " + why + "\n" + t.out.String()})
	}
}

// end closes the stream: unfinished tests and packages, and build failures
// no package reported.
func (p *goParser) end() {
	p.unfinished("", true, "the stream ended first (truncated?)")
	names := make([]string, 0, len(p.pkgs))
	for name := range p.pkgs {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return p.pkgs[a].order - p.pkgs[b].order })
	reported := map[string]bool{}
	for _, name := range names {
		g := p.pkgs[name]
		if g.failedBuild != "" {
			reported[g.failedBuild] = true
		}
		if g.final == "" && g.failed == 0 {
			p.packageFailure(name, g, 0)
		} else if g.final == "" {
			p.b.problem("package %s: no final result (stream truncated?)", name)
		}
	}
	for _, ip := range p.buildFail {
		if reported[ip] {
			continue
		}
		// A stream cut after the build: no package event names this
		// build failure.
		if g := p.pkgs[buildPackage(ip)]; g != nil && g.final == "fail" {
			continue // counted when the package failed
		}
		out := ""
		if b := p.builds[ip]; b != nil {
			out = b.String()
		}
		p.b.problem("build of %s failed: %s", ip, firstBuildError(out))
		p.b.add(Case{Name: buildPackage(ip) + " (package)", Status: StatusFail,
			Message: "build failed: " + ip + "\n" + out})
	}
}

// buildPackage returns the package of a build import path such as
// "example.com/x [example.com/x.test]".
func buildPackage(importPath string) string {
	if i := strings.Index(importPath, " ["); i >= 0 {
		return importPath[:i]
	}
	return importPath
}

// firstBuildError returns the first line of build output that is not a
// "# package" header.
func firstBuildError(out string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return clean(line, 200)
		}
	}
	return "(no build output)"
}

// isBenchmark reports whether test names a benchmark or one of its
// sub-benchmarks.
func isBenchmark(test string) bool {
	return strings.HasPrefix(test, "Benchmark")
}

// isGoFraming reports whether a test's output line is test2json framing
// ("=== RUN", "--- FAIL: ...") rather than what the test printed.
func isGoFraming(out string) bool {
	s := strings.TrimLeft(out, " ")
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS:", "--- FAIL:", "--- SKIP:", "--- BENCH:"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// isGoNoise reports whether a package-level output line carries nothing a
// person needs to see why the package failed.
func isGoNoise(out string) bool {
	s := strings.TrimSpace(out)
	if s == "PASS" || s == "FAIL" || s == "" {
		return true
	}
	for _, p := range []string{"ok  \t", "exit status ", "goos: ", "goarch: ", "pkg: ", "cpu: ", "coverage: "} {
		if strings.HasPrefix(out, p) {
			return true
		}
	}
	return false
}
