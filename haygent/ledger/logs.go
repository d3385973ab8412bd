package ledger

import (
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/ipfs/go-cid"
)

// its exit evidence names, with the step, attempt and transition.
type StepLog struct {
	Evidence cid.Cid // the exit evidence
	Seq      int64   // the transition
	Step     string
	Attempt  int64
	Code     int64
	TimedOut bool
	Argv     []string
	Stdout   LogRef
	Stderr   LogRef
}

// Failed reports whether the step exited other than 0 or timed out.
func (s *StepLog) Failed() bool { return s.Code != 0 || s.TimedOut }

// LogRef is one output stream of an exec step as its evidence names it:
// a raw block, or an hg/file@1 for output over one chunk.
type LogRef struct {
	CID cid.Cid
	// Truncated is true when the output went past the capture limit:
	// what is stored is its beginning.
	Truncated bool
	// Err says why the evidence names no readable CID.
	Err error
}

// StepLogs returns the logs of every exec step of the ledger, in the
// order of its transitions. It reads nothing: [ReadLog] reads a log.
func (l *Ledger) StepLogs() []StepLog {
	var out []StepLog
	for _, t := range l.Transitions {
		for _, e := range t.Evidence {
			ev := l.Evidence[e.Cid]
			if ev == nil || ev.Kind != "exit" {
				continue
			}
			d := ev.Data
			s := StepLog{Evidence: e.Cid, Seq: t.Seq, Step: ev.Step, Attempt: ev.Attempt,
				Code: asInt64(d["code"]), TimedOut: d["timed_out"] == true,
				Stdout: logRef(d, "stdout"), Stderr: logRef(d, "stderr")}
			if argv, ok := d["argv"].([]any); ok {
				for _, a := range argv {
					s.Argv = append(s.Argv, fmt.Sprint(a))
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func logRef(d map[string]any, stream string) LogRef {
	r := LogRef{Truncated: d[stream+"_truncated"] == true}
	s, ok := d[stream].(string)
	if !ok {
		r.Err = fmt.Errorf("the evidence names no %s", stream)
		return r
	}
	c, err := cid.Decode(s)
	if err != nil {
		r.Err = fmt.Errorf("the evidence's %s is not a CID: %w", stream, cas.ErrInvalid)
		return r
	}
	r.CID = c
	return r
}

func asInt64(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case uint64:
		return int64(n)
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return 0
}

// ReadLog writes the output a log names to w: a raw block as it is, an
// hg/file@1 read and verified chunk by chunk. The store may no longer
// hold it: exit evidence names its output by CID string, not by link, so
// gc does not keep it.
func ReadLog(ctx context.Context, st cas.Store, c cid.Cid, w io.Writer) (int64, error) {
	switch c.Type() {
	case cas.Raw:
		var n int
		err := st.View(ctx, c, func(d []byte) error {
			var err error
			n, err = w.Write(d)
			return err
		})
		return int64(n), err
	case cas.DagCBOR:
		return cas.ReadFile(ctx, st, c, w, nil)
	}
	return 0, fmt.Errorf("%s is neither a raw block nor a file: %w", c, cas.ErrInvalid)
}

// tailBytes returns up to limit bytes from the end of the output c names,
// reading only the last chunks of a file.
func tailBytes(ctx context.Context, st cas.Store, c cid.Cid, limit int) ([]byte, error) {
	var chunks []cid.Cid
	switch c.Type() {
	case cas.Raw:
		chunks = []cid.Cid{c}
	case cas.DagCBOR:
		n, err := cas.LoadFileNode(ctx, st, c)
		if err != nil {
			return nil, err
		}
		for n.Height > 0 {
			if n, err = cas.LoadFileNode(ctx, st, n.Links[len(n.Links)-1].Cid); err != nil {
				return nil, err
			}
		}
		for _, l := range n.Links[max(0, len(n.Links)-2):] {
			chunks = append(chunks, l.Cid)
		}
	default:
		return nil, fmt.Errorf("%s is neither a raw block nor a file: %w", c, cas.ErrInvalid)
	}
	var out []byte
	for _, ch := range chunks {
		if err := st.View(ctx, ch, func(d []byte) error { out = append(out, d...); return nil }); err != nil {
			return nil, err
		}
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// Tail is the end of a failed exec step's output, as a report shows it.
type Tail struct {
	Stream string   // stderr, or stdout when stderr is empty
	CID    cid.Cid  // the output it is the end of
	Lines  []string // the last lines, escaped ([LogLine]), each at most tailLineMax bytes before escaping
	Err    error    // the output could not be read
}

// Bounds of a report's tails.
const (
	TailLines   = 10
	tailRead    = 64 << 10
	tailLineMax = 400
)

// loadTails reads the ends of the output of the ledger's failed exec
// steps. A log that cannot be read is a Tail with Err, never an error of
// the ledger: the log is not part of what the receipt vouches for.
func loadTails(ctx context.Context, st cas.Store, l *Ledger) map[cid.Cid]*Tail {
	var tails map[cid.Cid]*Tail
	for _, s := range l.StepLogs() {
		if !s.Failed() {
			continue
		}
		if tails == nil {
			tails = map[cid.Cid]*Tail{}
		}
		t := &Tail{Stream: "stderr", CID: s.Stderr.CID}
		tails[s.Evidence] = t
		data, err := readRef(ctx, st, s.Stderr)
		if err == nil && len(data) == 0 {
			t.Stream, t.CID = "stdout", s.Stdout.CID
			data, err = readRef(ctx, st, s.Stdout)
		}
		if err != nil {
			t.Err = err
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(data) == 0 {
			lines = nil
		}
		// The first line may begin before what was read: drop it unless
		// all of the output was.
		if len(data) == tailRead && len(lines) > 1 {
			lines = lines[1:]
		}
		lines = lines[max(0, len(lines)-TailLines):]
		for _, ln := range lines {
			more := ""
			if len(ln) > tailLineMax {
				cut := tailLineMax
				for cut > 0 && !utf8.RuneStart(ln[cut]) {
					cut--
				}
				more = fmt.Sprintf(" ... (%d more bytes)", len(ln)-cut)
				ln = ln[:cut]
			}
			t.Lines = append(t.Lines, LogLine(ln)+more)
		}
	}
	return tails
}

func readRef(ctx context.Context, st cas.Store, r LogRef) ([]byte, error) {
	if r.Err != nil {
		return nil, r.Err
	}
	return tailBytes(ctx, st, r.CID, tailRead)
}

// LogLine is one line of a step's output made safe to print: every
// character a terminal would act on is escaped ([textsafe.Escape]) but
// the tab, which only moves the cursor on.
func LogLine(s string) string {
	if !strings.Contains(s, "\t") {
		return textsafe.Escape(s)
	}
	parts := strings.Split(s, "\t")
	for i, p := range parts {
		parts[i] = textsafe.Escape(p)
	}
	return strings.Join(parts, "\t")
}
