package perm

import (
	"fmt"
	"math/big"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// Verbs of entries and of operations.
const (
	VerbRead    = "read"
	VerbWrite   = "write"
	VerbDelete  = "delete" // operations only: decided by write:file entries
	VerbRun     = "run"
	VerbNetwork = "network"
	VerbSecret  = "secret"
	VerbPublish = "publish"
	VerbSpend   = "spend"
)

// Kinds of operations ([Op.Kind]).
const (
	KindFile    = "file"
	KindCommand = "command"
	KindHost    = "host"
	KindEnv     = "env"
	KindTarget  = "target"
	KindAmount  = "amount"
)

// none is the value of the grant that excludes every other grant of its
// verb.
const none = "none"

// noneVerbs are the verbs with a "none" form, in Snapshot order.
var noneVerbs = []string{VerbNetwork, VerbPublish, VerbSecret, VerbSpend}

// entry is a parsed grant or deny entry.
type entry struct {
	text string // normalized, as Snapshot and Decision.Rule show it
	verb string // read, write, run, network, secret, publish, spend
	none bool

	glob Glob   // read, write
	name string // run: command; secret: variable; publish: target
	host string // network: lower-case name or IP address
	port string // network: "" for any port

	amount *big.Rat // spend
	unit   string   // spend: "" or the unit written after the number
}

// target is an operation's target, parsed like the entries it is matched
// against.
type target struct {
	verb   string // the entry verb that decides it: delete → write
	segs   []string
	name   string
	host   string
	port   string
	amount *big.Rat
	unit   string
}

// parseEntry parses one grant (deny false) or deny entry. It returns the
// reason the entry is refused, or "".
func parseEntry(s string, deny bool) (entry, string) {
	if s == "" {
		return entry{}, "empty entry"
	}
	if strings.TrimSpace(s) != s {
		return entry{}, "leading or trailing white space"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return entry{}, "holds a control character"
		}
	}
	verb, rest, ok := strings.Cut(s, ":")
	if !ok {
		return entry{}, "want VERB:KIND:TARGET or VERB:VALUE"
	}
	e := entry{verb: verb}
	switch verb {
	case VerbRead, VerbWrite, VerbRun:
		kind, tgt, ok := strings.Cut(rest, ":")
		if !ok {
			return entry{}, fmt.Sprintf("want %s:KIND:TARGET", verb)
		}
		want := KindFile
		if verb == VerbRun {
			want = KindCommand
		}
		if kind != want {
			return entry{}, fmt.Sprintf("unknown kind %q for %s (want %q)", kind, verb, want)
		}
		if verb == VerbRun {
			if why := checkCommandName(tgt); why != "" {
				return entry{}, why
			}
			e.name = tgt
			e.text = "run:command:" + tgt
			return e, ""
		}
		g, err := ParseGlob(tgt)
		if err != nil {
			return entry{}, "bad pattern: " + strings.TrimPrefix(err.Error(), ErrBadPath.Error()+": ")
		}
		e.glob = g
		e.text = verb + ":file:" + g.String()
		return e, ""

	case VerbNetwork, VerbSecret, VerbPublish, VerbSpend:
		if rest == none {
			if deny {
				return entry{}, `"none" is a grant; it cannot be denied`
			}
			e.none = true
			e.text = verb + ":" + none
			return e, ""
		}
		var why string
		switch verb {
		case VerbNetwork:
			e.host, e.port, why = parseHostPort(rest)
			e.text = "network:" + joinHostPort(e.host, e.port)
		case VerbSecret:
			why = checkEnvName(rest)
			e.name = rest
			e.text = "secret:" + rest
		case VerbPublish:
			why = checkPublishTarget(rest)
			e.name = rest
			e.text = "publish:" + rest
		case VerbSpend:
			if deny {
				return entry{}, "spend cannot be denied; grant a lower amount"
			}
			var norm string
			e.amount, e.unit, norm, why = parseAmount(rest)
			e.text = "spend:" + norm
		}
		if why != "" {
			return entry{}, why
		}
		return e, ""
	}
	return entry{}, fmt.Sprintf("unknown verb %q", verb)
}

// matches reports whether the entry decides t. A "none" entry matches
// nothing.
func (e *entry) matches(t *target) bool {
	if e.none || e.verb != t.verb {
		return false
	}
	switch e.verb {
	case VerbRead, VerbWrite:
		return matchSegs(e.glob.segs, t.segs)
	case VerbRun, VerbSecret, VerbPublish:
		return e.name == t.name
	case VerbNetwork:
		return e.host == t.host && (e.port == "" || e.port == t.port)
	case VerbSpend:
		return e.unit == t.unit && t.amount.Cmp(e.amount) <= 0
	}
	return false
}

// covers reports whether e matches every operation g matches. False may be
// conservative for file patterns (see globCovers).
func (e *entry) covers(g *entry) bool {
	if e.verb != g.verb || e.none || g.none {
		return false
	}
	switch e.verb {
	case VerbRead, VerbWrite:
		return globCovers(e.glob, g.glob)
	case VerbRun, VerbSecret, VerbPublish:
		return e.name == g.name
	case VerbNetwork:
		return e.host == g.host && (e.port == "" || e.port == g.port)
	case VerbSpend:
		return e.unit == g.unit && g.amount.Cmp(e.amount) <= 0
	}
	return false
}

// parseOp parses op into the target entries are matched against, or
// returns the rule that refuses it outright.
func parseOp(op Op) (*target, string) {
	t := &target{verb: op.Verb}
	invalid := func(why string) (*target, string) {
		return nil, RuleInvalid + ": " + why
	}
	switch {
	case op.Kind == KindFile && (op.Verb == VerbRead || op.Verb == VerbWrite || op.Verb == VerbDelete):
		p, err := CleanPath(op.Target)
		if err != nil {
			return invalid(strings.TrimPrefix(err.Error(), ErrBadPath.Error()+": "))
		}
		if op.Verb == VerbDelete {
			t.verb = VerbWrite
		}
		t.segs = splitClean(p)
	case op.Verb == VerbRun && op.Kind == KindCommand:
		if why := checkCommandName(op.Target); why != "" {
			return invalid(why)
		}
		t.name = op.Target
	case op.Verb == VerbNetwork && op.Kind == KindHost:
		var why string
		if t.host, t.port, why = parseHostPort(op.Target); why != "" {
			return invalid(why)
		}
	case op.Verb == VerbSecret && op.Kind == KindEnv:
		if why := checkEnvName(op.Target); why != "" {
			return invalid(why)
		}
		t.name = op.Target
	case op.Verb == VerbPublish && op.Kind == KindTarget:
		if why := checkPublishTarget(op.Target); why != "" {
			return invalid(why)
		}
		t.name = op.Target
	case op.Verb == VerbSpend && op.Kind == KindAmount:
		var why string
		if t.amount, t.unit, _, why = parseAmount(op.Target); why != "" {
			return invalid(why)
		}
	default:
		return nil, RuleDefault
	}
	return t, ""
}

// checkCommandName: a command name is a letter or digit followed by
// letters, digits, ".", "_" and "-", at most 64 bytes.
func checkCommandName(s string) string {
	if s == "" || len(s) > 64 {
		return "a command name has 1 to 64 characters"
	}
	for i, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			i > 0 && (c == '.' || c == '_' || c == '-')
		if !ok {
			return fmt.Sprintf("bad command name %q: want [A-Za-z0-9][A-Za-z0-9._-]*", s)
		}
	}
	return ""
}

// checkEnvName: a secret is named like an environment variable.
func checkEnvName(s string) string {
	if s == "" || len(s) > 256 {
		return "a secret name has 1 to 256 characters"
	}
	for i, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return fmt.Sprintf("bad secret name %q: want [A-Za-z_][A-Za-z0-9_]*", s)
		}
	}
	return ""
}

// checkPublishTarget: any printable text without white space, at most 256
// bytes, other than "none".
func checkPublishTarget(s string) string {
	if s == "" || len(s) > 256 {
		return "a publish target has 1 to 256 bytes"
	}
	if s == none {
		return `"none" is not a publish target`
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Sprintf("publish target %q holds white space or an unprintable character", s)
		}
	}
	return ""
}

// parseHostPort parses HOST, HOST:PORT, [IPv6] or [IPv6]:PORT, or a bare
// IPv6 address (which then has no port). Host names are lower-cased; IP
// addresses are written in their canonical form.
func parseHostPort(s string) (host, port, why string) {
	var h string
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", fmt.Sprintf("bad host %q: missing ]", s)
		}
		h = s[1:end]
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", "", fmt.Sprintf("bad host %q: not an IPv6 address in brackets", s)
		}
		host = a.String()
		rest := s[end+1:]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return "", "", fmt.Sprintf("bad host %q: junk after ]", s)
			}
			if port, why = checkPort(p); why != "" {
				return "", "", why
			}
		}
		return host, port, ""
	case strings.Count(s, ":") > 1:
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return "", "", fmt.Sprintf("bad host %q: not an IPv6 address (write [ADDR]:PORT for a port)", s)
		}
		return a.String(), "", ""
	}
	h, p, hasPort := strings.Cut(s, ":")
	if hasPort {
		if port, why = checkPort(p); why != "" {
			return "", "", why
		}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Zone() != "" {
			return "", "", fmt.Sprintf("bad host %q: zones are not allowed", s)
		}
		return a.String(), port, ""
	}
	host = strings.ToLower(h)
	if why = checkHostName(host); why != "" {
		return "", "", why
	}
	return host, port, ""
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port == "" {
		return host
	}
	return host + ":" + port
}

func checkPort(p string) (string, string) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return "", fmt.Sprintf("bad port %q: want 1 to 65535 without leading zeros", p)
	}
	return p, ""
}

// checkHostName: DNS labels of letters, digits, "-" and "_", no wildcard.
func checkHostName(h string) string {
	if h == "" || len(h) > 253 {
		return fmt.Sprintf("bad host %q: a host name has 1 to 253 characters", h)
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Sprintf("bad host %q: empty, long or hyphen-edged label", h)
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("bad host %q: want letters, digits, '-', '_' and '.' (no wildcards)", h)
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return fmt.Sprintf("bad host %q: neither an IP address nor a host name", h)
	}
	return ""
}

// parseAmount parses DIGITS[.DIGITS][UNIT], UNIT being a letter followed by
// letters, digits and "_": "5", "2.50USD", "100000tokens". The normalized
// form drops leading zeros of the integer part and trailing zeros of the
// fraction: "02.50USD" is "2.5USD".
func parseAmount(s string) (amount *big.Rat, unit, norm, why string) {
	bad := func() (*big.Rat, string, string, string) {
		return nil, "", "", fmt.Sprintf("bad amount %q: want DIGITS[.DIGITS][UNIT], such as 5 or 2.50USD", s)
	}
	if len(s) > 64 {
		return bad()
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], s[i:]
	ip, fp, hasDot := strings.Cut(num, ".")
	if ip == "" || strings.Contains(fp, ".") || hasDot && fp == "" {
		return bad()
	}
	for j, c := range []byte(unit) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || j > 0 && c >= '0' && c <= '9') {
			return bad()
		}
	}
	ip = strings.TrimLeft(ip, "0")
	if ip == "" {
		ip = "0"
	}
	fp = strings.TrimRight(fp, "0")
	norm = ip
	if fp != "" {
		norm += "." + fp
	}
	amount, ok := new(big.Rat).SetString(norm)
	if !ok {
		return bad()
	}
	return amount, unit, norm + unit, ""
}
