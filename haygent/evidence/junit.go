package evidence

import (
	"bufio"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// maxXMLDepth bounds the element nesting the JUnit parser follows.
const maxXMLDepth = 256

// junitSuite is an open <testsuite> or <testsuites> element and what was
// counted inside it.
type junitSuite struct {
	elem, name string
	depth      int
	attrs      map[string]string // tests, failures, errors, skipped, as written
	total      int
	failures   int // cases with a <failure>
	errs       int // cases with an <error> and no <failure>
	skipped    int
}

// junitCase is an open <testcase>.
type junitCase struct {
	depth              int
	c                  Case
	failure, err, skip bool
	msg                textBuf
	captureDepth       int // depth of the <failure>/<error>/<skipped> being read, or 0
}

// ParseJUnit reads a JUnit XML report and counts its <testcase> elements;
// see the package documentation for the rules. The summary attributes of
// suites are only checked against the count: a disagreement is a Problem.
//
// It returns an error when the reader fails or the document does not start
// with a <testsuites> or <testsuite> element; malformed XML after that,
// including a report cut off by MaxInputSize, is a Problem.
func ParseJUnit(r io.Reader) (*TestReport, error) {
	cr := newCapReader(r)
	b := newBuilder(FormatJUnit)
	dec := xml.NewDecoder(cr)
	dec.CharsetReader = charsetReader

	var (
		depth    int
		rootSeen bool
		suites   []*junitSuite
		cur      *junitCase
	)
	where := func() string {
		line, _ := dec.InputPos()
		return fmt.Sprintf("line %d", line)
	}
	// broken ends parsing at a decoder error met after the root element.
	broken := func(err error) (*TestReport, error) {
		if cr.err != nil {
			return nil, fmt.Errorf("evidence: read JUnit: %w", cr.err)
		}
		b.problem("malformed XML at %s: %v", where(), err)
		return b.finish(cr), nil
	}
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if cr.err != nil {
				return nil, fmt.Errorf("evidence: read JUnit: %w", cr.err)
			}
			if !rootSeen {
				return nil, fmt.Errorf("evidence: parse JUnit: %w: %w", ErrNoReport, err)
			}
			if cur != nil && (cur.failure || cur.err) {
				b.problem("testcase %q cut off after its failure", clean(cur.c.Name, 200))
				cur.c.Status = StatusFail
				cur.c.Message = cur.msg.String()
				b.add(cur.c)
			}
			return broken(err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			name := t.Name.Local
			if depth > maxXMLDepth {
				b.problem("elements nested deeper than %d at %s; the rest is not read", maxXMLDepth, where())
				return b.finish(cr), nil
			}
			if depth == 1 {
				if name != "testsuites" && name != "testsuite" {
					if !rootSeen {
						return nil, fmt.Errorf("evidence: parse JUnit: %w: root element is <%s>, not <testsuites> or <testsuite>", ErrNoReport, clean(name, 100))
					}
					b.problem("unexpected top-level element <%s> at %s, ignored", clean(name, 100), where())
					if err := dec.Skip(); err != nil {
						return broken(err)
					}
					depth--
					continue
				}
				rootSeen = true
			}
			if cur != nil {
				if depth != cur.depth+1 {
					continue // inside a <failure>: its text is captured
				}
				switch name {
				case "failure", "error", "skipped":
					switch name {
					case "failure":
						cur.failure = true
					case "error":
						cur.err = true
					default:
						cur.skip = true
					}
					cur.captureDepth = depth
					if cur.msg.Len() > 0 {
						cur.msg.WriteString("\n")
					}
					if typ := attr(t, "type"); typ != "" && name != "skipped" {
						cur.msg.WriteString(typ + ": ")
					}
					if m := attr(t, "message"); m != "" {
						cur.msg.WriteString(m + "\n")
					}
				default: // system-out, properties, flakyFailure, rerunFailure, ...
					if err := dec.Skip(); err != nil {
						return broken(err)
					}
					depth--
				}
				continue
			}
			switch name {
			case "testsuites", "testsuite":
				s := &junitSuite{elem: name, name: attr(t, "name"), depth: depth, attrs: map[string]string{}}
				for _, a := range t.Attr {
					switch a.Name.Local {
					case "tests", "failures", "errors", "skipped":
						s.attrs[a.Name.Local] = a.Value
					}
				}
				suites = append(suites, s)
			case "testcase":
				cur = &junitCase{depth: depth, msg: textBuf{max: MaxMessageSize}}
				cur.c.Name = attr(t, "name")
				if cur.c.Name == "" {
					cur.c.Name = "(unnamed)"
				}
				cur.c.Suite = attr(t, "classname")
				if cur.c.Suite == cur.c.Name {
					cur.c.Suite = "" // jest-junit's default classname is the title
				}
				if cur.c.Suite == "" && len(suites) > 0 {
					cur.c.Suite = suites[len(suites)-1].name
				}
				if tm := strings.ReplaceAll(attr(t, "time"), ",", ""); tm != "" {
					if f, err := strconv.ParseFloat(tm, 64); err == nil {
						cur.c.Duration = seconds(f)
					}
				}
			case "properties", "property", "system-out", "system-err":
				if err := dec.Skip(); err != nil {
					return broken(err)
				}
				depth--
			}
		case xml.CharData:
			if cur != nil && cur.captureDepth != 0 {
				cur.msg.WriteString(string(t))
			}
		case xml.EndElement:
			switch {
			case cur != nil && depth == cur.captureDepth:
				cur.captureDepth = 0
			case cur != nil && depth == cur.depth:
				var s *junitSuite
				if len(suites) > 0 {
					s = suites[len(suites)-1]
				}
				switch {
				case cur.failure || cur.err:
					cur.c.Status = StatusFail
					if s != nil && cur.failure {
						s.failures++
					} else if s != nil {
						s.errs++
					}
				case cur.skip:
					cur.c.Status = StatusSkip
					if s != nil {
						s.skipped++
					}
				default:
					cur.c.Status = StatusPass
				}
				if s != nil {
					s.total++
				}
				if cur.c.Status != StatusPass {
					cur.c.Message = cur.msg.String()
				}
				b.add(cur.c)
				cur = nil
			case len(suites) > 0 && depth == suites[len(suites)-1].depth:
				s := suites[len(suites)-1]
				suites = suites[:len(suites)-1]
				checkSuite(b, s)
				if len(suites) > 0 {
					p := suites[len(suites)-1]
					p.total += s.total
					p.failures += s.failures
					p.errs += s.errs
					p.skipped += s.skipped
				}
			}
			depth--
		}
	}
	if !rootSeen {
		return nil, fmt.Errorf("evidence: parse JUnit: %w: no <testsuites> or <testsuite> element", ErrNoReport)
	}
	return b.finish(cr), nil
}

// checkSuite compares the summary attributes of a closed suite with what
// was counted inside it.
func checkSuite(b *builder, s *junitSuite) {
	label := "<" + s.elem + ">"
	if s.name != "" {
		label = fmt.Sprintf("%s %q", s.elem, clean(s.name, 200))
	}
	num := func(key string) (int, bool) {
		v, ok := s.attrs[key]
		if !ok {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			b.problem("%s: %s=%q is not a number", label, key, clean(v, 50))
			return 0, false
		}
		return n, true
	}
	if n, ok := num("tests"); ok && n != s.total {
		b.problem("%s: tests=%d but %d testcases counted", label, n, s.total)
	}
	f, okf := num("failures")
	e, oke := num("errors")
	if (okf || oke) && f+e != s.failures+s.errs {
		b.problem("%s: failures=%d errors=%d but %d failed and %d errored testcases counted",
			label, f, e, s.failures, s.errs)
	}
	if n, ok := num("skipped"); ok && n != s.skipped {
		b.problem("%s: skipped=%d but %d skipped testcases counted", label, n, s.skipped)
	}
}

// attr returns the value of the attribute named local, or "".
func attr(se xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// charsetReader lets encoding/xml read the few non-UTF-8 encodings JUnit
// writers declare.
func charsetReader(label string, in io.Reader) (io.Reader, error) {
	switch strings.ToLower(label) {
	case "iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1":
		return &latin1Reader{r: bufio.NewReader(in)}, nil
	case "us-ascii", "ascii":
		return in, nil
	}
	return nil, fmt.Errorf("unsupported XML encoding %q", label)
}

// latin1Reader transcodes ISO-8859-1 to UTF-8.
type latin1Reader struct {
	r       *bufio.Reader
	pend    byte
	hasPend bool
}

func (l *latin1Reader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if l.hasPend {
			p[n], l.hasPend = l.pend, false
			n++
			continue
		}
		if n > 0 && l.r.Buffered() == 0 {
			break
		}
		c, err := l.r.ReadByte()
		if err != nil {
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
		if c < 0x80 {
			p[n] = c
			n++
			continue
		}
		p[n] = 0xC0 | c>>6
		n++
		l.pend, l.hasPend = 0x80|c&0x3F, true
	}
	return n, nil
}
