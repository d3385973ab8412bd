package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
)

// The semantic lint. The shape rules of analyze prove a predicate constant
// only when its form shows it (`x || true`, `ev.a == ev.a`); `ev.ok ||
// !ev.ok`, `ev.failed >= 0 || ev.failed < 0` and `size(ev.problems) >= 0`
// pass them. So Lint also evaluates the gate over probes: evidence values
// that cover the boundaries of every field the predicate reads, typed as
// the runtime's evidence of the gate's kind holds them. A gate that some
// probe makes PASS and none makes FAIL cannot fail and is refused. It is a
// lint: a gate that is always true for reasons the probes do not reach (a
// property every real report has, a value no probe holds) is not refused.

// Types of the fields of evidence Data, as kindFields names them.
const (
	typeBool    = "bool"
	typeInt     = "int"
	typeString  = "string"
	typeStrings = "list of string"
)

// kindFields gives, per evidence kind, the top-level fields of the Data the
// runtime records for it and their types. A field listed here is probed
// only with values of its type; a field not listed (of a kind the runtime
// does not produce, or one it does not define) with values of every type.
// test_report is evidence.TestReport.Data (a test holds them equal); the
// others are what the runtime's steps record.
var kindFields = map[string]map[string]string{
	KindExit: {
		"code": typeInt, "timed_out": typeBool, "signal": typeString,
		"argv": typeStrings, "stdout": typeString, "stderr": typeString,
		"stdout_truncated": typeBool, "stderr_truncated": typeBool,
		"isolation": typeStrings, "duration_ms": typeInt,
	},
	KindTestReport: {
		"format": typeString, "ok": typeBool,
		"total": typeInt, "passed": typeInt, "failed": typeInt, "skipped": typeInt, "todo": typeInt,
		"problems": typeStrings, "failed_cases": typeStrings, "failed_cases_omitted": typeInt,
	},
	KindDigest: {
		"sha256": typeString, "size": typeInt, "a": typeString, "b": typeString, "equal": typeBool,
		"input": typeString, "output": typeString, "file": typeString,
	},
	KindRead:     {"path": typeString, "sha256": typeString, "size": typeInt},
	KindMutation: {"path": typeString, "before": typeString, "after": typeString, "file": typeString},
	KindApproval: {
		"type": typeString, "approver": typeString, "subject": typeString, "decision": typeString,
		"issued_at": typeString, "expires_at": typeString, "signature": typeString,
		"observed_subject": typeString, "valid": typeBool, "reason": typeString,
	},
}

// FieldType is the type the lint probes field of kind's evidence Data
// with: "bool", "int", "string" or "list of string"; "" for a field the
// kind does not define, which is probed with values of every type.
func FieldType(kind, field string) string { return kindFields[kind][field] }

const (
	// maxProbes bounds the evaluations of one gate's probe.
	maxProbes = 2048
	// maxValues bounds the values tried for one field (or element).
	maxValues = 96
	// probeBases is how many starting points each field is varied from.
	probeBases = 6
	// maxProbeLen bounds the length of a string or list made to reach a
	// size the predicate compares against; a predicate that takes a size
	// and names a larger constant is not probed.
	maxProbeLen = 1 << 16
)

// shape is what a predicate reads of a value: the fields it selects, the
// elements it indexes or ranges over, and, for a top-level field of a kind
// kindFields knows, its type.
type shape struct {
	typ    string
	fields map[string]*shape
	elem   *shape
	values []any // memo of prober.valuesOf
}

func (s *shape) field(name string) *shape {
	if s.fields == nil {
		s.fields = map[string]*shape{}
	}
	f, ok := s.fields[name]
	if !ok {
		f = &shape{}
		s.fields[name] = f
	}
	return f
}

func (s *shape) element() *shape {
	if s.elem == nil {
		s.elem = &shape{}
	}
	return s.elem
}

// absent stands, among a field's values, for the field being left out.
type absentValue struct{}

var absent = absentValue{}

// prober builds the probes of one predicate.
type prober struct {
	root    *shape
	opaque  bool // ev is used whole (size(ev), a range over its keys)
	dynamic bool // a value is indexed by a computed key: not modelled
	sized   bool // the predicate takes a size
	ints    []int64
	doubles []float64
	strs    []string
	byts    [][]byte
	names   []string // field names read, as strings

	intMemo []int64
	strMemo []string
}

// probeResult is what probing a gate found.
type probeResult struct {
	failed  bool             // some probe made the gate FAIL
	passed  bool             // some probe made it PASS
	skipped bool             // the predicate is not modelled; nothing was tried
	count   int              // probes evaluated
	tried   []map[string]any // the probes, in the order tried
	fields  []string         // the top-level fields varied
}

// probe evaluates g over generated evidence until one probe makes it FAIL,
// or the probes run out. g needs only its spec (kind, subject, predicate)
// and its compiled predicate.
func probe(g *Gate) probeResult {
	p := &prober{root: &shape{}}
	expr := g.pred.ast.NativeRep().Expr()
	p.literals(expr)
	p.walk(expr, map[string]*shape{"ev": p.root})
	if p.dynamic {
		return probeResult{skipped: true}
	}
	if p.sized && slices.ContainsFunc(p.numbers(), func(k float64) bool { return k > maxProbeLen }) {
		// A size compared against a constant no probe reaches.
		return probeResult{skipped: true}
	}
	known := kindFields[g.spec.Evidence]
	if p.opaque {
		for f := range known {
			p.root.field(f)
		}
	}
	names := make([]string, 0, len(p.root.fields))
	for f, s := range p.root.fields {
		s.typ = known[f]
		names = append(names, f)
	}
	slices.Sort(names)
	vals := make([][]any, len(names))
	for i, f := range names {
		vals[i] = append(slices.Clip(p.valuesOf(p.root.fields[f])), absent)
	}

	res := probeResult{fields: names}
	subject := g.spec.Subject
	if subject == "" {
		subject = "step:probe"
	}
	at := time.Unix(0, 0).UTC()
	seen := map[string]bool{}
	// try evaluates the probe that takes value idx[i] for field i, unless
	// it was tried before; done is true once a probe failed the gate or
	// the probes ran out.
	try := func(idx []int) (done bool) {
		key := fmt.Sprint(idx)
		if seen[key] {
			return false
		}
		seen[key] = true
		data := map[string]any{}
		for i, f := range names {
			if v := vals[i][idx[i]]; v != absent {
				data[f] = v
			}
		}
		res.count++
		res.tried = append(res.tried, data)
		r := g.Evaluate([]Evidence{{Ref: "probe", Kind: g.spec.Evidence, Subject: subject, ObservedAt: at, Data: data}}, Env{Now: at})
		switch r.Verdict {
		case Fail:
			res.failed = true
		case Pass:
			res.passed = true
		}
		return res.failed || res.count >= maxProbes
	}

	// Each field in turn takes every value it has while the others hold
	// those of a base: the first values, the second, the third, then
	// bases drawn at random (with a fixed seed, so the lint decides the
	// same way every time).
	rng := rand.New(rand.NewPCG(0x68672d67617465, uint64(len(names))))
	for b := range probeBases {
		base := make([]int, len(names))
		for i := range base {
			if b < 3 {
				base[i] = b % len(vals[i])
			} else {
				base[i] = rng.IntN(len(vals[i]))
			}
		}
		if try(base) {
			return res
		}
		for i := range names {
			for j := range vals[i] {
				idx := slices.Clone(base)
				idx[i] = j
				if try(idx) {
					return res
				}
			}
		}
	}
	// Then the values together: every combination when there are at most
	// maxProbes of them, else combinations drawn at random.
	combos := 1
	for _, v := range vals {
		combos *= len(v)
		if combos > maxProbes {
			break
		}
	}
	if combos <= maxProbes {
		idx := make([]int, len(names))
		for {
			if try(idx) {
				return res
			}
			i := 0
			for ; i < len(idx); i++ {
				if idx[i]++; idx[i] < len(vals[i]) {
					break
				}
				idx[i] = 0
			}
			if i == len(idx) {
				return res
			}
		}
	}
	for range 4 * maxProbes {
		idx := make([]int, len(names))
		for i := range idx {
			idx[i] = rng.IntN(len(vals[i]))
		}
		if try(idx) {
			return res
		}
	}
	return res
}

// probeProblem is the lint's message for a gate no probe fails, or "".
func probeProblem(g *Gate) string {
	res := probe(g)
	if res.failed || res.skipped || !res.passed {
		// A gate no probe passes either (its result is never a bool,
		// say) is not one that cannot fail.
		return ""
	}
	fields := make([]string, 0, len(res.fields))
	for i, f := range res.fields {
		if i == 6 {
			fields = append(fields, fmt.Sprintf("and %d more", len(res.fields)-i))
			break
		}
		fields = append(fields, "ev."+f)
	}
	varying := "no field"
	if len(fields) > 0 {
		varying = strings.Join(fields, ", ")
	}
	var samples []string
	for _, i := range sampleIndexes(len(res.tried)) {
		samples = append(samples, formatProbe(res.tried[i]))
	}
	return fmt.Sprintf("predicate: no probe makes it false, so the gate cannot fail: tried %d values of ev, varying %s, among them %s",
		res.count, varying, strings.Join(samples, ", "))
}

// sampleIndexes picks up to five of n probes to name, spread over the
// order they were tried in.
func sampleIndexes(n int) []int {
	var out []int
	for k := range 5 {
		if i := k * (n - 1) / 4; n > 0 && !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// formatProbe writes a probe as compact JSON, long strings and lists cut.
func formatProbe(data map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(shorten(data)); err != nil {
		return fmt.Sprint(data)
	}
	return strings.TrimSpace(buf.String())
}

func shorten(v any) any {
	switch x := v.(type) {
	case string:
		if utf8.RuneCountInString(x) > 24 {
			r := []rune(x)
			return fmt.Sprintf("%s...(%d characters)", string(r[:12]), len(r))
		}
	case []any:
		if len(x) > 4 {
			out := make([]any, 0, 4)
			for _, e := range x[:3] {
				out = append(out, shorten(e))
			}
			return append(out, fmt.Sprintf("...(%d items)", len(x)))
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = shorten(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = shorten(e)
		}
		return out
	}
	return v
}

// literals collects the constants of e, to probe at and around them.
func (p *prober) literals(e celast.Expr) {
	if e.Kind() == celast.LiteralKind {
		switch v := e.AsLiteral().(type) {
		case types.Int:
			p.ints = append(p.ints, int64(v))
		case types.Uint:
			if uint64(v) <= math.MaxInt64 {
				p.ints = append(p.ints, int64(v))
			}
		case types.Double:
			if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
				p.doubles = append(p.doubles, float64(v))
			}
		case types.String:
			p.strs = append(p.strs, string(v))
		case types.Bytes:
			p.byts = append(p.byts, []byte(v))
		}
		return
	}
	for _, ch := range children(e) {
		p.literals(ch)
	}
}

// walk records what e reads of ev: env maps the names in scope to the
// shapes they stand for (ev to the root, a comprehension's variable to the
// elements of the value it ranges over).
func (p *prober) walk(e celast.Expr, env map[string]*shape) {
	switch e.Kind() {
	case celast.IdentKind:
		if s, ok := env[e.AsIdent()]; ok && s == p.root {
			p.opaque = true
		}
		return
	case celast.SelectKind:
		if p.resolve(e, env) != nil {
			return
		}
	case celast.CallKind:
		c := e.AsCall()
		args := c.Args()
		if c.FunctionName() == "size" {
			p.sized = true
		}
		switch {
		case c.FunctionName() == operators.Index && len(args) == 2:
			if p.resolve(e, env) != nil {
				return
			}
			if p.resolve(args[0], env) != nil {
				p.dynamic = true // a computed key into evidence
				p.walk(args[1], env)
				return
			}
		case c.FunctionName() == operators.In && len(args) == 2:
			if f, ok := stringLiteral(args[0]); ok {
				if s := p.resolve(args[1], env); s != nil {
					s.field(f)
					return
				}
			}
		}
	case celast.ComprehensionKind:
		c := e.AsComprehension()
		p.walk(c.IterRange(), env)
		p.walk(c.AccuInit(), env)
		rng := p.resolve(c.IterRange(), env)
		inner := shadow(env, c.AccuVar(), c.IterVar(), c.IterVar2())
		if rng != nil {
			if c.HasIterVar2() {
				inner[c.IterVar2()] = rng.element()
			} else {
				inner[c.IterVar()] = rng.element()
			}
		}
		p.walk(c.LoopCondition(), inner)
		p.walk(c.LoopStep(), inner)
		p.walk(c.Result(), shadow(env, c.AccuVar()))
		return
	}
	for _, ch := range children(e) {
		p.walk(ch, env)
	}
}

// shadow copies env without names.
func shadow(env map[string]*shape, names ...string) map[string]*shape {
	out := make(map[string]*shape, len(env))
	for k, v := range env {
		if !slices.Contains(names, k) {
			out[k] = v
		}
	}
	return out
}

// resolve returns the shape of the value e is, when e is a path: a name in
// env, a field of a path (a.f, a["f"], has(a.f)) or an element of one
// (a[0]). It records the path as read.
func (p *prober) resolve(e celast.Expr, env map[string]*shape) *shape {
	switch e.Kind() {
	case celast.IdentKind:
		return env[e.AsIdent()]
	case celast.SelectKind:
		sel := e.AsSelect()
		s := p.resolve(sel.Operand(), env)
		if s == nil {
			return nil
		}
		p.names = append(p.names, sel.FieldName())
		return s.field(sel.FieldName())
	case celast.CallKind:
		c := e.AsCall()
		args := c.Args()
		if c.FunctionName() != operators.Index || len(args) != 2 || args[1].Kind() != celast.LiteralKind {
			return nil
		}
		s := p.resolve(args[0], env)
		if s == nil {
			return nil
		}
		switch k := args[1].AsLiteral().(type) {
		case types.String:
			p.names = append(p.names, string(k))
			return s.field(string(k))
		case types.Int, types.Uint, types.Double:
			return s.element()
		}
	}
	return nil
}

// valuesOf lists the values a probe gives s: of its type when known, else
// of every type (maps of its fields and lists of its elements first).
func (p *prober) valuesOf(s *shape) []any {
	if s.values != nil {
		return s.values
	}
	var out []any
	switch s.typ {
	case typeInt:
		out = anyOf(p.intValues())
	case typeBool:
		out = []any{false, true}
	case typeString:
		out = anyOf(p.stringValues())
	case typeStrings:
		s.element().typ = typeString
		out = p.lists(s.elem)
	default:
		if len(s.fields) > 0 {
			out = append(out, p.maps(s)...)
		}
		if s.elem != nil {
			out = append(out, p.lists(s.elem)...)
		}
		ints, strs := p.intValues(), p.stringValues()
		out = append(out, ints[0], ints[1], ints[2], false, true, strs[0], strs[1],
			nil, 0.5, []byte{}, []any{}, map[string]any{})
		// The rest of each type in turn, so that the cut at maxValues
		// leaves some of every type.
		out = append(out, interleave(anyOf(ints[3:]), anyOf(strs[2:]), anyOf(p.doubleValues()), anyOf(p.bytesValues()))...)
	}
	out = dedupe(out)
	if len(out) > maxValues {
		out = out[:maxValues]
	}
	s.values = out
	return out
}

// maps are values of a shape read as a map: its fields at their first
// values, then each field varied in turn, and left out.
func (p *prober) maps(s *shape) []any {
	names := make([]string, 0, len(s.fields))
	for f := range s.fields {
		names = append(names, f)
	}
	slices.Sort(names)
	base := map[string]any{}
	vals := make([][]any, len(names))
	for i, f := range names {
		vals[i] = p.valuesOf(s.fields[f])
		base[f] = vals[i][0]
	}
	out := []any{base}
	per := max(2, maxValues/max(1, len(names)))
	for i, f := range names {
		for _, v := range append(slices.Clip(vals[i][1:min(len(vals[i]), per)]), absent) {
			m := make(map[string]any, len(base))
			for k, bv := range base {
				m[k] = bv
			}
			if v == absent {
				delete(m, f)
			} else {
				m[f] = v
			}
			out = append(out, m)
		}
	}
	return out
}

// lists are values of a shape read as a list: empty, one element of each
// sort, two, and as long as the sizes the predicate names and one more.
func (p *prober) lists(elem *shape) []any {
	ev := p.valuesOf(elem)
	out := []any{[]any{}}
	for _, e := range ev {
		out = append(out, []any{e})
	}
	if len(ev) > 1 {
		out = append(out, []any{ev[0], ev[1]}, []any{ev[1], ev[0]})
	}
	for _, n := range p.sizes() {
		for _, m := range []int{n - 1, n, n + 1} {
			if m >= 2 && m <= maxProbeLen {
				l := make([]any, m)
				for i := range l {
					l[i] = ev[0]
				}
				out = append(out, l)
				if len(ev) > 1 {
					l2 := slices.Clone(l)
					l2[m-1] = ev[1]
					out = append(out, l2)
				}
			}
		}
	}
	return out
}

// sizes are the lengths the predicate may compare a size against: its
// integer constants from 1 to maxProbeLen.
func (p *prober) sizes() []int {
	var out []int
	for _, k := range p.ints {
		if k >= 1 && k <= maxProbeLen && !slices.Contains(out, int(k)) {
			out = append(out, int(k))
		}
	}
	return out
}

// numbers are the integer and double constants, each as a double.
func (p *prober) numbers() []float64 {
	out := slices.Clone(p.doubles)
	for _, k := range p.ints {
		out = append(out, float64(k))
	}
	return out
}

func (p *prober) intValues() []int64 {
	if p.intMemo != nil {
		return p.intMemo
	}
	var out []int64
	add := func(vs ...int64) { out = append(out, vs...) }
	add(0, 1, -1)
	near := func(k int64) {
		if k > math.MinInt64 {
			add(k - 1)
		}
		add(k)
		if k < math.MaxInt64 {
			add(k + 1)
		}
	}
	for _, k := range p.ints {
		near(k)
	}
	for _, d := range p.doubles {
		if math.Abs(d) < 1<<62 {
			near(int64(math.Floor(d)))
			near(int64(math.Ceil(d)))
		}
	}
	add(2, 1<<31, -1<<31, 1<<53, -1<<53, math.MaxInt64, math.MinInt64, math.MaxInt64-1, math.MinInt64+1)
	if nums := p.numbers(); len(nums) <= 6 {
		for _, a := range nums {
			for _, b := range nums {
				for _, r := range combine(a, b) {
					if r == math.Trunc(r) && math.Abs(r) < 1<<62 {
						add(int64(r))
					}
				}
			}
		}
	}
	p.intMemo = dedupeOf(out)
	return p.intMemo
}

func (p *prober) doubleValues() []float64 {
	var out []float64
	add := func(vs ...float64) {
		for _, v := range vs {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				out = append(out, v)
			}
		}
	}
	add(0, 1, -1, 0.5, -0.5)
	nums := p.numbers()
	for _, k := range nums {
		add(k, k-1, k+1, k-0.5, k+0.5, math.Nextafter(k, math.Inf(1)), math.Nextafter(k, math.Inf(-1)))
	}
	add(1e300, -1e300, math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64)
	if len(nums) <= 6 {
		for _, a := range nums {
			for _, b := range nums {
				add(combine(a, b)...)
			}
		}
	}
	return dedupeOf(out)
}

// combine gives a*b, a+b, a-b and a/b, for values a product or quotient
// of constants reaches (`ev.x / 2 != 3` fails at 6).
func combine(a, b float64) []float64 {
	out := []float64{a * b, a + b, a - b}
	if b != 0 {
		out = append(out, a/b)
	}
	return out
}

func (p *prober) stringValues() []string {
	if p.strMemo != nil {
		return p.strMemo
	}
	var out []string
	add := func(vs ...string) { out = append(out, vs...) }
	add("", "x")
	add(p.strs...)
	for _, s := range p.strs {
		if m, ok := regexMatch(s); ok {
			add(m, "x"+m)
		}
	}
	for _, s := range p.strs {
		add(s+"x", "x"+s)
		if r := []rune(s); len(r) > 0 {
			add(string(r[:len(r)-1]))
		}
		for _, layout := range []string{time.RFC3339Nano, time.RFC3339} {
			if t, err := time.Parse(layout, s); err == nil {
				add(t.Add(-time.Second).Format(time.RFC3339Nano), t.Add(time.Second).Format(time.RFC3339Nano))
				break
			}
		}
		if d, err := time.ParseDuration(s); err == nil {
			add((d - time.Second).String(), (d + time.Second).String())
		}
	}
	add("X", " ", "é", "NaN", "0", "1", "-1", "true",
		"1970-01-01T00:00:00Z", "2000-01-01T00:00:00Z", "2999-12-31T23:59:59Z", "0s", "1s", "-1s")
	add(p.names...)
	for _, n := range p.sizes() {
		for _, m := range []int{n - 1, n, n + 1} {
			if m >= 2 {
				add(strings.Repeat("x", m))
			}
		}
	}
	add(strings.Repeat("x", 1000))
	p.strMemo = dedupeOf(out)
	return p.strMemo
}

func (p *prober) bytesValues() [][]byte {
	out := [][]byte{{}, []byte("x")}
	out = append(out, p.byts...)
	for _, s := range p.strs {
		out = append(out, []byte(s))
	}
	return out
}

// regexMatch returns a string the RE2 pattern matches, if it is one and a
// simple walk of it finds such a string.
func regexMatch(pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if !genMatch(re.Simplify(), &b, 0) || b.Len() > maxProbeLen {
		return "", false
	}
	return b.String(), true
}

func genMatch(re *syntax.Regexp, b *strings.Builder, depth int) bool {
	if depth > 64 || b.Len() > maxProbeLen {
		return false
	}
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
		return true
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return false
		}
		b.WriteRune(re.Rune[0])
		return true
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('x')
		return true
	case syntax.OpCapture, syntax.OpPlus:
		return genMatch(re.Sub[0], b, depth+1)
	case syntax.OpRepeat:
		for range min(re.Min, 1000) {
			if !genMatch(re.Sub[0], b, depth+1) {
				return false
			}
		}
		return true
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !genMatch(sub, b, depth+1) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			var alt strings.Builder
			if genMatch(sub, &alt, depth+1) {
				b.WriteString(alt.String())
				return true
			}
		}
	}
	return false
}

func anyOf[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// interleave takes one value of each list in turn.
func interleave(lists ...[]any) []any {
	var out []any
	for i := 0; ; i++ {
		more := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				more = true
			}
		}
		if !more {
			return out
		}
	}
}

// dedupeOf drops repeated values, keeping the first of each.
func dedupeOf[T comparable](vs []T) []T {
	seen := map[T]bool{}
	out := make([]T, 0, len(vs))
	for _, v := range vs {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// dedupe drops repeated values, by their JSON form and Go type.
func dedupe(vs []any) []any {
	seen := map[string]bool{}
	var out []any
	for _, v := range vs {
		j, err := json.Marshal(v)
		key := fmt.Sprintf("%T:%s", v, j)
		if err != nil {
			key = fmt.Sprintf("%T:%v", v, v)
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, v)
		}
	}
	return out
}
