package natsengine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
)

// runTrace is what happened during a run, in order: invocations taken
// and finished by workers (from their events) and nodes accepted by the
// scheduler (from its events).
type runTrace struct {
	t        *testing.T
	t0       time.Time
	mu       sync.Mutex
	steps    []traceStep
	node     map[string]string // invocation id -> node
	accepted int
	// onTake, if set, is called (without the lock) when a worker takes
	// an invocation.
	onTake func(worker int)
}

type traceStep struct {
	kind   string // "took", "done" (a worker published a receipt), "accepted"
	node   string
	worker int // -1 for the scheduler
}

// workerEvents returns worker i's Events: it records the invocations
// it takes and finishes, and logs every event.
func (tr *runTrace) workerEvents(i int) func(natsengine.WorkerEvent) {
	t := tr.t
	return func(ev natsengine.WorkerEvent) {
		tr.logf("worker %d: %s", i, ev)
		switch ev.Event {
		case natsengine.EventTook:
			tr.mu.Lock()
			tr.node[ev.ID] = ev.Node
			tr.steps = append(tr.steps, traceStep{"took", ev.Node, i})
			onTake := tr.onTake
			tr.mu.Unlock()
			if onTake != nil {
				onTake(i)
			}
		case natsengine.EventDone:
			tr.mu.Lock()
			if node, ok := tr.node[ev.ID]; ok {
				tr.steps = append(tr.steps, traceStep{"done", node, i})
			} else {
				t.Errorf("worker %d: done %s, which it did not take", i, ev.ID)
			}
			tr.mu.Unlock()
		}
	}
}

// event records the scheduler's acceptances.
func (tr *runTrace) event(e scheduler.Event) {
	if e.State != dag.Done || e.Committed || e.Memo {
		return
	}
	tr.mu.Lock()
	tr.steps = append(tr.steps, traceStep{"accepted", e.Node, -1})
	tr.accepted++
	tr.mu.Unlock()
}

// logf logs with the time since the test began.
func (tr *runTrace) logf(format string, args ...any) {
	tr.t.Helper()
	tr.t.Logf("%7.3fs "+format, append([]any{time.Since(tr.t0).Seconds()}, args...)...)
}

func (tr *runTrace) acceptedSoFar() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.accepted
}

// writeFanout writes a Work Order of n echo nodes (builtin steps only)
// shaped as a fan-out: one root, n-1 leaves that need it. It is the
// fan-out of the scheduler's BenchmarkScheduler.
func writeFanout(tb testing.TB, n int) string {
	tb.Helper()
	echo, err := filepath.Abs("../../fixtures/haygents/echo")
	if err != nil {
		tb.Fatal(err)
	}
	nodes := map[string]any{}
	for i := range n {
		name := fmt.Sprintf("n%06d", i)
		node := map[string]any{"haygent": echo, "input": map[string]any{"value": i}}
		if i > 0 {
			node["needs"] = []string{"n000000"}
			node["input"] = map[string]any{"value": map[string]any{"from": "n000000", "pointer": "/value"}, "i": i}
		}
		nodes[name] = node
	}
	data, err := json.Marshal(map[string]any{"workorder": "fanout", "objective": "measure the NATS engine", "nodes": nodes})
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "fanout.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}
