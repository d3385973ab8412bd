package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/internal/textsafe"
	"github.com/haygent/hg/scheduler"
)

// runProgress shows a run's progress on stderr as its nodes move. On a
// terminal (or with --progress) it is one line, redrawn in place: nodes
// done of all, running, failed and blocked, and the time since the run
// began; a node that fails is also said on a line of its own, which
// stays. Elsewhere (a pipe, a log file) each node that finishes is one
// line. hg run --json streams the events instead and uses neither.
type runProgress struct {
	mu     sync.Mutex
	w      io.Writer
	live   bool // redraw one line, rather than a line per finished node
	total  int
	start  time.Time
	now    func() time.Time
	states map[string]string
	counts map[string]int
	drawn  int       // the width of the line on screen; 0 when none is
	last   time.Time // when it was last drawn
	stop   chan struct{}
	ticker sync.WaitGroup
	ended  bool // finish was called: nothing is drawn any more
}

// newRunProgress starts showing the progress of a run of total nodes,
// some of which may be in a state already (a resumed run's).
func newRunProgress(w io.Writer, live bool, total int, states map[string]string) *runProgress {
	p := &runProgress{w: w, live: live, total: total, now: time.Now, states: map[string]string{}, counts: map[string]int{}}
	p.start = p.now()
	for n, s := range states {
		p.states[n] = s
		p.counts[s]++
	}
	if live {
		p.stop = make(chan struct{})
		p.ticker.Add(1)
		go func() {
			defer p.ticker.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-t.C:
					p.mu.Lock()
					p.draw()
					p.mu.Unlock()
				}
			}
		}()
		p.mu.Lock()
		p.draw()
		p.mu.Unlock()
	}
	return p
}

// event takes a node's move. A committed event repeats an earlier one
// and is not shown again.
func (p *runProgress) event(ev scheduler.Event) {
	if ev.Committed {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.states[ev.Node]; ok {
		p.counts[old]--
	}
	p.states[ev.Node] = ev.State
	p.counts[ev.State]++
	if !p.live {
		if dag.Final(ev.State) {
			fmt.Fprintf(p.w, "hg: %s\n", nodeLine(p.counts[dag.Done], p.total, ev))
		}
		return
	}
	if ev.State == dag.Failed {
		p.clear()
		fmt.Fprintf(p.w, "hg: %s\n", nodeLine(p.counts[dag.Done], p.total, ev))
	}
	if p.now().Sub(p.last) >= 100*time.Millisecond || ev.State == dag.Failed {
		p.draw()
	}
}

// note says a line of what happens beside the nodes (the NATS server
// lost, a worker gone silent): "hg: TEXT", escaped, above the progress
// line, which is drawn again.
func (p *runProgress) note(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, "hg: %s\n", oneLine(text))
	if p.live && !p.ended {
		p.draw()
	}
}

// finish takes the progress line off the screen: the outcome follows.
func (p *runProgress) finish() {
	if !p.live {
		return
	}
	close(p.stop)
	p.ticker.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ended = true
	p.clear()
}

func (p *runProgress) draw() {
	line := progressLine(p.counts[dag.Done], p.total, p.counts[dag.Active]+p.counts[dag.Concluded],
		p.counts[dag.Failed], p.counts[dag.Blocked], p.now().Sub(p.start))
	// Spaces cover what is left of a longer line drawn before.
	pad := max(0, p.drawn-len(line))
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.drawn, p.last = len(line)+pad, p.now()
}

// clear blanks the progress line and puts the cursor at its start.
func (p *runProgress) clear() {
	if p.drawn > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.drawn))
		p.drawn = 0
	}
}

// progressLine is the line a terminal shows while a run goes on:
// "hg: 3/8 nodes done, 2 running, 1 failed, 12s". Counts of none are
// left out; it stays short enough for a narrow terminal.
func progressLine(done, total, running, failed, blocked int, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hg: %d/%d nodes done", done, total)
	for _, c := range []struct {
		n    int
		what string
	}{{running, "running"}, {failed, "failed"}, {blocked, "blocked"}} {
		if c.n > 0 {
			fmt.Fprintf(&b, ", %d %s", c.n, c.what)
		}
	}
	if elapsed >= time.Second {
		elapsed = elapsed.Truncate(time.Second)
	}
	fmt.Fprintf(&b, ", %s", formatElapsed(elapsed))
	return b.String()
}

// nodeLine is a finished node as a line: "[3/8] seed done (cached)",
// "[3/8] probe failed: REASON", the node's name and reason escaped.
func nodeLine(done, total int, ev scheduler.Event) string {
	s := textsafe.Sprintf("[%d/%d] %s %s", done, total, ev.Node, ev.State)
	if ev.Memo {
		s += " (cached)"
	}
	if ev.State != dag.Done && ev.Reason != "" {
		s += ": " + textsafe.Escape(ev.Reason)
	}
	return s
}

// resumedStates are the states of a resumed run's nodes before it goes
// on, so that its progress counts what was done before; nil for a new
// run, or when the record cannot be read (Execute then says why).
func resumedStates(ctx context.Context, g *globals, run string, resume bool) map[string]string {
	if !resume {
		return nil
	}
	st, err := g.openStoreWaiting(ctx, true, commandLine(g.args))
	if err != nil {
		return nil
	}
	defer st.Close()
	rec, _, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		return nil
	}
	states := make(map[string]string, len(rec.Nodes))
	for _, n := range rec.Nodes {
		states[n.Name] = n.State
	}
	return states
}
