package perm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Op is one operation a step asks for. Verb and Kind pair up as:
//
//	read    file     workspace-relative path         "project/a.go"
//	write   file     workspace-relative path
//	delete  file     workspace-relative path (decided by write:file entries)
//	run     command  command name                    "go-test"
//	network host     HOST, HOST:PORT, [IPv6]:PORT     "example.com:443"
//	secret  env      variable name                   "GITHUB_TOKEN"
//	publish target   publish target
//	spend   amount   DIGITS[.DIGITS][UNIT]            "0.25USD"
//
// Any other pair is denied by default.
type Op struct {
	Verb   string `json:"verb"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
}

// String returns "verb:kind:target".
func (o Op) String() string { return o.Verb + ":" + o.Kind + ":" + o.Target }

// Decision is the answer of [Set.Check]. Rule is the normalized entry that
// decided (a grant when Allowed; a deny entry or a "none" grant when not),
// [RuleDefault] when nothing did, or [RuleInvalid] and the reason when the
// target itself was refused.
type Decision struct {
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule"`
}

// Set is a parsed, validated permission set. Make one with [Parse] or
// [New]. A Set is immutable, so it is safe for concurrent use; a nil *Set
// denies everything.
type Set struct {
	grants   []entry // sorted by text
	deny     []entry // sorted by text
	none     map[string]string
	commands map[string][]string
}

// document is permissions.json.
type document struct {
	Grants   []string            `json:"grants"`
	Deny     []string            `json:"deny"`
	Commands map[string][]string `json:"commands"`
}

// Parse parses the permissions.json of a Haygent package (the schema is in
// the package documentation). It refuses unknown, duplicate or
// differently-cased keys, values of the wrong type and trailing data, and
// then applies every rule of [New]. Errors wrap [ErrInvalid].
func Parse(data []byte) (*Set, error) {
	docErr := func(format string, args ...any) error {
		return &EntryError{Where: "permissions.json", Reason: fmt.Sprintf(format, args...)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := checkKeys(dec, 0); err != nil {
		return nil, docErr("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, docErr("trailing data after the JSON object")
	}
	var doc document
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, docErr("%v", err)
	}
	return New(doc.Grants, doc.Deny, doc.Commands)
}

// checkKeys reads one JSON value from dec and refuses duplicate object
// keys at any depth and, at the top (depth 0), anything but an object
// whose keys are exactly some of "grants", "deny" and "commands".
func checkKeys(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if depth == 0 && (!ok || d != '{') {
		return errors.New("want a JSON object")
	}
	if !ok {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			k := tok.(string)
			if seen[k] {
				return fmt.Errorf("duplicate key %q", k)
			}
			seen[k] = true
			if depth == 0 && k != "grants" && k != "deny" && k != "commands" {
				return fmt.Errorf("unknown key %q (want grants, deny, commands)", k)
			}
			if err := checkKeys(dec, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := checkKeys(dec, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// New builds a Set from grant entries, deny entries and named commands, as
// in permissions.json. It refuses, with an [*EntryError]:
//
//   - an entry outside the grammar (see the package documentation), an
//     unknown verb or kind, a bad pattern, host, name or amount;
//   - a duplicate entry (after normalization) in the same list;
//   - "none" next to another grant of its verb, such as network:none with
//     network:example.com, and two spend grants in the same unit;
//   - "none" or spend in deny;
//   - run:command:NAME granted without a command NAME;
//   - a command with an empty argv or argv[0], or a NUL byte in an
//     argument, and a command no run:command grant or deny entry names.
func New(grants, deny []string, commands map[string][]string) (*Set, error) {
	s := &Set{none: map[string]string{}, commands: map[string][]string{}}
	names := slices.Sorted(maps.Keys(commands))
	for _, name := range names {
		argv := commands[name]
		where := "commands[" + strconv.Quote(name) + "]"
		bad := func(why string) error {
			return &EntryError{Where: where, Reason: why}
		}
		if why := checkCommandName(name); why != "" {
			return nil, bad(why)
		}
		if len(argv) == 0 || argv[0] == "" {
			return nil, bad("want an argv with a program name first")
		}
		for _, a := range argv {
			if strings.IndexByte(a, 0) >= 0 {
				return nil, bad("an argument holds a NUL byte")
			}
		}
		s.commands[name] = slices.Clone(argv)
	}

	used := map[string]bool{}
	var err error
	if s.grants, err = parseList("grants", grants, false, func(i int, e *entry, prior []entry) string {
		for j, p := range prior {
			switch {
			case p.verb != e.verb:
			case p.none || e.none:
				return fmt.Sprintf("conflicts with grants[%d] %q: none excludes every other %s grant", j, grants[j], e.verb)
			case e.verb == VerbSpend && p.unit == e.unit:
				return fmt.Sprintf("a second spend limit in the same unit as grants[%d] %q", j, grants[j])
			}
		}
		if e.verb == VerbRun {
			if _, ok := s.commands[e.name]; !ok {
				return fmt.Sprintf("no command %q in commands", e.name)
			}
			used[e.name] = true
		}
		if e.none {
			s.none[e.verb] = e.text
		}
		return ""
	}); err != nil {
		return nil, err
	}
	if s.deny, err = parseList("deny", deny, true, func(_ int, e *entry, _ []entry) string {
		if e.verb == VerbRun {
			used[e.name] = true
		}
		return ""
	}); err != nil {
		return nil, err
	}
	for _, name := range names {
		if !used[name] {
			return nil, &EntryError{Where: "commands[" + strconv.Quote(name) + "]",
				Reason: "no run:command grant or deny entry names this command"}
		}
	}
	return s, nil
}

// parseList parses a list of entries, refusing duplicates and whatever
// check refuses (check sees the entries before e, by index), and returns
// them sorted by normalized text.
func parseList(field string, raw []string, deny bool, check func(i int, e *entry, prior []entry) string) ([]entry, error) {
	out := make([]entry, 0, len(raw))
	for i, r := range raw {
		where := fmt.Sprintf("%s[%d]", field, i)
		e, why := parseEntry(r, deny)
		if why == "" {
			for j, p := range out {
				if p.text == e.text {
					why = fmt.Sprintf("duplicate of %s[%d] %q", field, j, raw[j])
					break
				}
			}
		}
		if why == "" {
			why = check(i, &e, out)
		}
		if why != "" {
			return nil, &EntryError{Where: where, Entry: r, Reason: why}
		}
		out = append(out, e)
	}
	// Indices in messages above refer to raw order, so sort only now.
	sort.SliceStable(out, func(a, b int) bool { return out[a].text < out[b].text })
	return out, nil
}

// Check decides op. A deny entry that matches wins over every grant; then
// the first matching grant (in [Set.Snapshot] order) allows; otherwise op
// is denied by the "none" grant of its verb if one was written, else by
// [RuleDefault]. A target that does not parse (a path [CleanPath] refuses,
// a bad host) is denied with [RuleInvalid]; an unknown verb or kind with
// [RuleDefault]. File targets are cleaned before matching, so
// "project/./a.go" is "project/a.go".
func (s *Set) Check(op Op) Decision {
	t, rule := parseOp(op)
	if t == nil {
		return Decision{Rule: rule}
	}
	if s == nil {
		return Decision{Rule: RuleDefault}
	}
	for i := range s.deny {
		if s.deny[i].matches(t) {
			return Decision{Rule: s.deny[i].text}
		}
	}
	for i := range s.grants {
		if s.grants[i].matches(t) {
			return Decision{Allowed: true, Rule: s.grants[i].text}
		}
	}
	if r, ok := s.none[t.verb]; ok {
		return Decision{Rule: r}
	}
	return Decision{Rule: RuleDefault}
}

// Require is [Set.Check] as an error: nil if op is allowed, else a
// [*DeniedError].
func (s *Set) Require(op Op) error {
	if d := s.Check(op); !d.Allowed {
		return &DeniedError{Op: op, Rule: d.Rule}
	}
	return nil
}

// Command returns a copy of the exact argv of the command name if
// run:command:name is allowed. The runtime executes it as is, without a
// shell. A command that is denied, not granted or unknown is a
// [*DeniedError] (wrapping [ErrDenied]).
func (s *Set) Command(name string) ([]string, error) {
	if err := s.Require(Op{Verb: VerbRun, Kind: KindCommand, Target: name}); err != nil {
		return nil, err
	}
	return slices.Clone(s.commands[name]), nil
}

// NetworkNone reports whether no network access is allowed at all: there
// is no network grant, or network:none, or every host granted is also
// denied outright.
func (s *Set) NetworkNone() bool { return len(s.NetworkHosts()) == 0 }

// NetworkHosts returns the network grants in effect, as normalized HOST,
// HOST:PORT or [IPv6]:PORT strings (no port: any port), sorted, leaving
// out those a deny entry cancels entirely. A deny entry that cancels only
// some ports of a host still takes effect in [Set.Check].
func (s *Set) NetworkHosts() []string {
	return s.effective(VerbNetwork, func(e *entry) Op {
		return Op{Verb: VerbNetwork, Kind: KindHost, Target: joinHostPort(e.host, e.port)}
	})
}

// Secrets returns the names of the secrets the step may receive, sorted,
// leaving out denied ones.
func (s *Set) Secrets() []string {
	return s.effective(VerbSecret, func(e *entry) Op {
		return Op{Verb: VerbSecret, Kind: KindEnv, Target: e.name}
	})
}

// effective returns the targets of the grants of verb that Check allows.
func (s *Set) effective(verb string, op func(*entry) Op) []string {
	if s == nil {
		return nil
	}
	var out []string
	for i := range s.grants {
		e := &s.grants[i]
		if e.verb != verb || e.none {
			continue
		}
		o := op(e)
		if s.Check(o).Allowed {
			out = append(out, o.Target)
		}
	}
	return out
}

// SpendLimit returns the normalized amount of the spend grant in unit (""
// for an amount written without one), and whether there is one. The limit
// applies to each spend operation [Set.Check] sees; keeping a running
// total against it is the caller's job.
func (s *Set) SpendLimit(unit string) (string, bool) {
	if s == nil {
		return "", false
	}
	for _, e := range s.grants {
		if e.verb == VerbSpend && !e.none && e.unit == unit {
			return strings.TrimPrefix(e.text, "spend:"), true
		}
	}
	return "", false
}

// MayMatchUnder reports whether some file strictly below the directory dir
// could be allowed for verb ("read" or "write"), judging by the grant
// patterns only. False means none can; walks use it to skip directories.
func (s *Set) MayMatchUnder(verb, dir string) bool {
	if s == nil {
		return false
	}
	for _, e := range s.grants {
		if e.verb == verb && (verb == VerbRead || verb == VerbWrite) && e.glob.MayMatchUnder(dir) {
			return true
		}
	}
	return false
}

// Snapshot returns the set in a normalized, sorted form whose hash
// identifies it. Each line is one of:
//
//	grant ENTRY                  a normalized grant
//	deny ENTRY                   a normalized deny entry
//	command NAME ["argv",...]    a command, its argv as a JSON array
//
// A verb with a "none" form (network, publish, secret, spend) and no grant
// shows as "grant VERB:none", whether or not it was written, so two files
// that mean the same thing have the same snapshot.
func (s *Set) Snapshot() []string {
	if s == nil {
		s = &Set{}
	}
	var out []string
	have := map[string]bool{}
	for _, e := range s.grants {
		out = append(out, "grant "+e.text)
		have[e.verb] = true
	}
	for _, v := range noneVerbs {
		if !have[v] {
			out = append(out, "grant "+v+":"+none)
		}
	}
	for _, e := range s.deny {
		out = append(out, "deny "+e.text)
	}
	for name, argv := range s.commands {
		b, _ := json.Marshal(argv) // []string always marshals
		out = append(out, "command "+name+" "+string(b))
	}
	sort.Strings(out)
	return out
}

// Widens returns what other permits that s does not, sorted; nil means
// every operation other allows, s allows too (so a proposal that replaces
// s by other adds nothing). Each line is one of:
//
//	grant ENTRY     a grant of other that no grant of s covers
//	deny ENTRY      a deny entry of s that no deny entry of other covers
//	command NAME    a command both grant, with a different argv in other
//
// Coverage of file patterns is decided conservatively: a grant s does
// cover may, for exotic patterns, still be reported, never the reverse.
func (s *Set) Widens(other *Set) []string {
	if other == nil {
		return nil
	}
	if s == nil {
		s = &Set{}
	}
	var out []string
	for i := range other.grants {
		g := &other.grants[i]
		if g.none {
			continue
		}
		if !slices.ContainsFunc(s.grants, func(h entry) bool { return h.covers(g) }) {
			out = append(out, "grant "+g.text)
			continue
		}
		if g.verb == VerbRun && !slices.Equal(s.commands[g.name], other.commands[g.name]) {
			out = append(out, "command "+g.name)
		}
	}
	for i := range s.deny {
		d := &s.deny[i]
		if !slices.ContainsFunc(other.deny, func(h entry) bool { return h.covers(d) }) {
			out = append(out, "deny "+d.text)
		}
	}
	sort.Strings(out)
	return out
}
