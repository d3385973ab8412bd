package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/haygent/hg/belief"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/scheduler"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Submitted runs execute in the hg mcp process, in the background, as
// hg run executes them (runPlan: the same scheduler, engine, trusted
// keys, acceptance, run lock and crystallization); submit returns once
// the run is started and holds its lock, so that status finds it. When
// hg mcp stops, its runs are cancelled as ^C cancels hg run ('hg resume
// RUN' goes on).

// mcpMaxAnswers bounds the answers of one submit, encoded as JSON.
const mcpMaxAnswers = 64 << 10

// mcpDefaultMaxRuns is how many runs one server executes at once unless
// hg mcp --max-runs says otherwise.
const mcpDefaultMaxRuns = 4

// mcpRuns are the runs one server executes.
type mcpRuns struct {
	max    int // runs executing at once
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	byID   map[string]*mcpRun
	active int // runs executing or starting
}

// mcpRun is one run executing in the background.
type mcpRun struct {
	done chan struct{} // closed when it stops
	err  error         // why it stopped, when not at its outcome; read after done
}

func newMCPRuns(ctx context.Context, max int) *mcpRuns {
	ctx, cancel := context.WithCancel(ctx)
	return &mcpRuns{max: max, ctx: ctx, cancel: cancel, byID: map[string]*mcpRun{}}
}

// reserve counts a run about to start against the limit, or refuses it;
// release gives the place back.
func (r *mcpRuns) reserve() (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active >= r.max {
		return nil, fmt.Errorf("%d runs are executing, at most %d at once (hg mcp --max-runs): wait for one to end (status)", r.active, r.max)
	}
	r.active++
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			r.active--
			r.mu.Unlock()
		})
	}, nil
}

// stop cancels every run and waits for them to stop.
func (r *mcpRuns) stop() {
	r.cancel()
	r.wg.Wait()
}

// changed returns a channel closed when run stops (nil, which never
// fires, for a run this server does not execute).
func (r *mcpRuns) changed(run string) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if x := r.byID[run]; x != nil {
		return x.done
	}
	return nil
}

// err returns why a run this server executed stopped short of its
// outcome with an error (a HALT is not one: status says halted), or nil.
func (r *mcpRuns) err(run string) error {
	r.mu.Lock()
	x := r.byID[run]
	r.mu.Unlock()
	if x == nil {
		return nil
	}
	select {
	case <-x.done:
		var halt haltError
		if errors.As(x.err, &halt) {
			return nil
		}
		return x.err
	default:
		return nil
	}
}

type submitIn struct {
	WorkOrder string         `json:"workorder" jsonschema:"the Work Order file, under the server's root"`
	Answers   map[string]any `json:"answers,omitempty" jsonschema:"answers to the decisions plan lists as open: decision name to value"`
}

type submitOut struct {
	Run       string        `json:"run" jsonschema:"the run id: follow it with status"`
	Decisions []decisionRec `json:"decisions,omitempty" jsonschema:"how each decision was bound"`
}

type decisionRec struct {
	Decision string `json:"decision"`
	Asked    bool   `json:"asked"`
	Source   string `json:"source"`
	Value    any    `json:"value"`
}

func (s *mcpServer) submit(ctx context.Context, _ *mcp.CallToolRequest, in submitIn) (*mcp.CallToolResult, submitOut, error) {
	// A client's answers are read as an answers file is: one JSON
	// object decoded strictly into the data model (integers stay
	// integers), so an answer means here what it means to hg run.
	var answers map[string]any
	if in.Answers != nil {
		data, err := json.Marshal(in.Answers)
		if err != nil {
			return nil, submitOut{}, fmt.Errorf("answers: %w", err)
		}
		if len(data) > mcpMaxAnswers {
			return nil, submitOut{}, fmt.Errorf("answers: %d bytes of JSON, at most %d", len(data), mcpMaxAnswers)
		}
		v, err := cas.DecodePlainJSON(data)
		if err != nil {
			return nil, submitOut{}, fmt.Errorf("answers: %w", err)
		}
		answers, _ = v.(map[string]any)
	}
	plan, err := s.loadPlan(in.WorkOrder)
	if err != nil {
		return nil, submitOut{}, err
	}
	var clarified bytes.Buffer
	g := s.globals(&clarified, io.Discard)
	if err := clarifyWith(ctx, g, plan.Plan, answers, "answers", belief.SourceClient, true); err != nil {
		var need needInputError
		if errors.As(err, &need) {
			// The questions, as hg run --json prints them.
			count, _, _ := strings.Cut(err.Error(), ":")
			return nil, submitOut{}, fmt.Errorf("%s, nothing run: give them in answers (plan lists them); the questions: %s", count, bytes.TrimSpace(clarified.Bytes()))
		}
		return nil, submitOut{}, err
	}
	if err := s.storeWorkspaces(ctx, plan.Plan); err != nil {
		return nil, submitOut{}, err
	}
	out := submitOut{}
	for _, d := range plan.Decisions {
		out.Decisions = append(out.Decisions, decisionRec{Decision: d.Slot, Asked: d.Asked, Source: d.Source, Value: jsonValue(d.Value)})
	}
	run, err := s.runs.start(ctx, s, plan.Plan)
	out.Run = run
	return nil, out, err
}

// start executes plan in the background and returns its run id once
// the run is started (stored, and its lock held), or the error that
// stopped it before.
func (r *mcpRuns) start(ctx context.Context, s *mcpServer, plan *scheduler.Plan) (string, error) {
	release, err := r.reserve()
	if err != nil {
		return "", err
	}
	events := newStartWatch()
	var stderr bytes.Buffer
	g := s.globals(events, &stderr)
	x := &mcpRun{done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(x.done)
		defer release()
		x.err = runPlan(r.ctx, g, plan, "", false, false, s.jobs, false, true, s.adapterSpec, s.model, &remoteFlags{}, "")
		if x.err != nil && stderr.Len() > 0 {
			x.err = fmt.Errorf("%w (%s)", x.err, bytes.TrimSpace(stderr.Bytes()))
		}
	}()
	select {
	case run := <-events.started:
		r.mu.Lock()
		r.byID[run] = x
		r.mu.Unlock()
		return run, nil
	case <-x.done:
		if x.err == nil {
			x.err = errors.New("the run stopped before it started")
		}
		return "", x.err
	case <-ctx.Done():
		// The run goes on; its id is in hg runs.
		return "", fmt.Errorf("the run did not start before the call ended: %w", ctx.Err())
	}
}

// startWatch is the stdout of a background run (hg run --json's
// events): it passes on the run id of the "started" event, and keeps
// nothing else.
type startWatch struct {
	mu      sync.Mutex
	buf     []byte
	seen    bool
	started chan string
}

func newStartWatch() *startWatch { return &startWatch{started: make(chan string, 1)} }

func (w *startWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	sc := bufio.NewScanner(bytes.NewReader(w.buf))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct {
			Run   string `json:"run"`
			Event string `json:"event"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == "started" && ev.Run != "" {
			w.seen, w.buf = true, nil
			w.started <- ev.Run
			return len(p), nil
		}
	}
	if i := bytes.LastIndexByte(w.buf, '\n'); i >= 0 {
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}
