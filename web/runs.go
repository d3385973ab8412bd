package web

import (
	"net/http"
	"slices"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/scheduler"
)

// runRow is one run of the runs page.
type runRow struct {
	Run, WorkOrder, Class, Status, Reason string
	Started, Took                         string
	Done, Nodes                           int64
	Error                                 string // the record cannot be read
}

type runsData struct {
	pageData
	Status, Class string   // the filters
	Statuses      []string // what the status filter offers
	Classes       []string
	Runs          []runRow
	Total         int // runs in the store
}

// Run statuses the runs page shows besides a record's: a run recorded
// running that no process executes, and one whose record cannot be read.
const (
	statusInterrupted = "interrupted"
	statusUnreadable  = "unreadable"
)

// runsPage lists the store's runs, newest first, filtered by status and
// class (?status=, ?class=).
func (s *Server) runsPage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	all, err := scheduler.ListRuns(r.Context(), st)
	if err != nil {
		return err
	}
	d := runsData{pageData: pageData{Title: "runs"}, Status: r.URL.Query().Get("status"), Class: r.URL.Query().Get("class"), Total: len(all),
		Statuses: []string{scheduler.StatusRunning, statusInterrupted, scheduler.StatusDone, scheduler.StatusHalted, scheduler.StatusCancelled, statusUnreadable}}
	if d.Status != "" && !slices.Contains(d.Statuses, d.Status) {
		return badRequest("status %q: want one of %v", d.Status, d.Statuses)
	}
	now := time.Now()
	for i := range all {
		ri := &all[i]
		row := runRow{Run: ri.Run, Status: statusUnreadable}
		if ri.Err != nil {
			row.Error = ri.Err.Error()
		} else {
			row.WorkOrder, row.Class, row.Reason = ri.WorkOrder, ri.Class, ri.Reason
			row.Status, row.Done, row.Nodes = ri.Status, ri.Done(), ri.Nodes
			executing := false
			if ri.Status == scheduler.StatusRunning {
				if executing = s.executing(ri.Run); !executing {
					row.Status = statusInterrupted
				}
			}
			if t := ri.StartedAt(); !t.IsZero() {
				row.Started = t.UTC().Format("2006-01-02 15:04:05Z")
				end := ri.UpdatedAt()
				if executing {
					end = now
				}
				if !end.Before(t) {
					row.Took = end.Sub(t).Round(time.Millisecond).String()
				}
			}
			if row.Class != "" && !slices.Contains(d.Classes, row.Class) {
				d.Classes = append(d.Classes, row.Class)
			}
		}
		if (d.Status == "" || d.Status == row.Status) && (d.Class == "" || d.Class == row.Class) {
			d.Runs = append(d.Runs, row)
		}
	}
	slices.Sort(d.Classes)
	return s.render(w, "runs", d)
}

// executing reports whether a process executes run now.
func (s *Server) executing(run string) bool {
	return s.cfg.Executing != nil && s.cfg.Executing(run)
}
