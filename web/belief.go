package web

import (
	"net/http"

	"github.com/haygent/hg/belief"
	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
)

type beliefRow struct {
	CID, Slot, Op, Value, Cause, Why, At string
}

type bindingRow struct{ Slot, Value, Event string }

type beliefData struct {
	pageData
	Class    string
	Classes  []string
	Events   []beliefRow
	Bindings []bindingRow
}

// beliefsPage lists the task classes that have a belief log.
func (s *Server) beliefsPage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	refs, err := st.Refs(r.Context(), belief.RefNamespace)
	if err != nil {
		return err
	}
	d := beliefData{pageData: pageData{Title: "belief logs"}}
	for _, ref := range refs {
		d.Classes = append(d.Classes, ref.Name)
	}
	return s.render(w, "beliefs", d)
}

// beliefPage shows a class's belief log, oldest event first, and the
// state it reduces to.
func (s *Server) beliefPage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	class := r.PathValue("class")
	if dag.CheckClass(class) != nil {
		return notFound("no task class %q", class)
	}
	log, err := belief.Log(r.Context(), st, class)
	if err != nil {
		return err
	}
	if log == nil {
		return notFound("task class %s has no belief log", class)
	}
	d := beliefData{pageData: pageData{Title: "belief log of " + class}, Class: class}
	for _, e := range log {
		d.Events = append(d.Events, beliefRow{CID: e.CID.String(), Slot: e.Slot, Op: e.Op, Value: dag.FormatValue(e.Value),
			Cause: e.Cause.String(), Why: e.Why, At: e.At})
	}
	state := belief.Reduce(log)
	for _, e := range log { // in the log's order, each slot once
		if b, ok := state[e.Slot]; ok {
			d.Bindings = append(d.Bindings, bindingRow{Slot: e.Slot, Value: dag.FormatValue(b.Value), Event: b.Event.CID.String()})
			delete(state, e.Slot)
		}
	}
	return s.render(w, "belief", d)
}
