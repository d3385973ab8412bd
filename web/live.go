package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/scheduler"
)

// liveState is one message of a live view: the run's status and the
// nodes whose state changed since the last message (every node in the
// first).
type liveState struct {
	Status string            `json:"status"`
	Reason string            `json:"reason,omitempty"`
	Nodes  map[string]string `json:"nodes"`
}

// runEvents streams a run's node states as server-sent events while a
// process executes it: an event "state" (liveState as JSON) when
// anything changed, then "end" once the run is no longer running, and a
// comment every 15 s to keep proxies from closing the stream.
//
// The store is opened read-only for each reading, every Config.Poll, and
// closed at once: hg run opens it for one short transaction at a time,
// and a reader that held it would stall the run's commits.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	run := r.PathValue("run")
	if scheduler.CheckRunID(run) != nil {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no run %q", run))
		return
	}
	select {
	case s.live <- struct{}{}:
		defer func() { <-s.live }()
	default:
		s.fail(w, r, http.StatusServiceUnavailable, errors.New("too many live views are open"))
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, http.StatusInternalServerError, errors.New("this connection cannot stream"))
		return
	}
	ctx := r.Context()
	// The first reading decides between a stream and an error page.
	cur, err := s.readStates(ctx, run)
	if err != nil {
		s.fail(w, r, statusOf(err), err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		data, err := json.Marshal(v) // escapes <, > and & as \u003c...
		if err != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return false
		}
		fl.Flush()
		return true
	}
	sent, sentStatus := map[string]string{}, ""
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	lastWrite := time.Now()
	for {
		msg := liveState{Status: cur.Status, Reason: cur.Reason, Nodes: map[string]string{}}
		for n, st := range cur.Nodes {
			if sent[n] != st {
				msg.Nodes[n] = st
				sent[n] = st
			}
		}
		if len(msg.Nodes) > 0 || sentStatus != cur.Status {
			sentStatus = cur.Status
			if !send("state", msg) {
				return
			}
			lastWrite = time.Now()
		}
		if cur.Status != scheduler.StatusRunning || !s.executing(run) {
			send("end", map[string]string{"status": cur.Status})
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(lastWrite) > 15*time.Second {
			if _, err := fmt.Fprint(w, ": still running\n\n"); err != nil {
				return
			}
			fl.Flush()
			lastWrite = time.Now()
		}
		next, err := s.readStates(ctx, run)
		var busy *cas.BusyError
		switch {
		case errors.As(err, &busy):
			continue // a writer holds the store for long: read at the next tick
		case err != nil:
			s.logf("live view of %s: %v", run, err)
			send("end", map[string]string{"error": err.Error()})
			return
		}
		cur = next
	}
}

// readStates reads the run's status and node states from its record.
func (s *Server) readStates(ctx context.Context, run string) (*liveState, error) {
	if err := s.gate.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.leave()
	st, err := s.cfg.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	rec, _, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		return nil, err
	}
	ls := &liveState{Status: rec.Status, Reason: rec.Reason, Nodes: make(map[string]string, len(rec.Nodes))}
	for _, n := range rec.Nodes {
		ls.Nodes[n.Name] = n.State
	}
	return ls, nil
}
