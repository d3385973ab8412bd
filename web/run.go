package web

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// verifyOnRunPage is the most nodes a run page verifies the receipts of:
// past it each node's verdict is on the node's page (a run of 10,000
// nodes would take seconds to verify in full; 'hg verify RUN' does).
const verifyOnRunPage = 200

type nodeRow struct {
	Name, State, Reason string
	Attempts            int64
	Memo, Breaker       bool
	Receipt             string // CID, or ""
	Verdict             *Verdict
	Href                string
}

type decisionRow struct {
	Slot, Question, Value, Source, Event string
	Critical, Asked                      bool
}

type eventRow struct {
	At, Node, Kind, From, To, Who, Reason string
}

type runData struct {
	pageData
	Run, Name, Objective, Status, Reason string
	Started, Updated, Class              string
	Record, WorkOrder                    string
	Executing                            bool
	Require, Mandatory                   []string
	Decisions                            []decisionRow
	Events                               []eventRow
	Trusted                              []string
	Graph                                svgGraph
	Nodes                                []nodeRow
	Counts                               []stateCount
	Verified                             bool // the run was verified for the page (its receipts' verdicts are in the table)
	// VerifyProblem is, for a verified run, its first failed check
	// ("NODE: CHECK: DETAIL" or "CHECK: DETAIL"); "" when all hold.
	VerifyProblem string
	LiveURL       string
	// The table shows one page of nodes; the DAG shows them all.
	NodeCount, Pages, First, Last int
	PageLinks                     []pageLink
}

type pageLink struct {
	N       int
	Current bool
}

// tableRows is how many nodes one page of a run's node table lists.
const tableRows = 500

type stateCount struct {
	State string
	N     int
}

// nodeHref is the address of a node's page.
func nodeHref(run, node string) string {
	return "/runs/" + url.PathEscape(run) + "/nodes/" + url.PathEscape(node)
}

// runPage shows a run: its outcome, decisions, its DAG drawn with every
// node's state, and a table of the nodes.
func (s *Server) runPage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	ctx := r.Context()
	run := r.PathValue("run")
	if scheduler.CheckRunID(run) != nil {
		return notFound("no run %q", run)
	}
	rec, root, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		return err
	}
	// A run small enough is verified whole for the page, as hg verify RUN
	// does: a node's receipt reads PASS only if the node's checks in the
	// run hold too, and the outcome holds only if every check does.
	var rv *scheduler.RunVerification
	if len(rec.Nodes) <= verifyOnRunPage {
		trusted, err := s.cfg.Trusted()
		if err != nil {
			return err
		}
		if rv, err = scheduler.VerifyRun(ctx, st, root, trusted, nil); err != nil {
			return err
		}
	}
	shape, err := s.shapes.shape(ctx, st, rec)
	if err != nil {
		return err
	}
	wo := shape.wo
	d := runData{pageData: pageData{Title: "run " + rec.Run}, Run: run, Name: rec.Name, Objective: rec.Objective,
		Status: rec.Status, Reason: rec.Reason, Started: rec.Started, Updated: rec.Updated, Class: rec.Class,
		Record: root.String(), WorkOrder: rec.WorkOrder.Cid.String(), Require: wo.Require, Mandatory: wo.Mandatory, Trusted: rec.Trusted}
	if rec.Status == scheduler.StatusRunning {
		if d.Executing = s.executing(run); d.Executing {
			d.LiveURL = "/runs/" + url.PathEscape(run) + "/events"
		} else {
			d.Status = statusInterrupted
		}
	}
	for _, dr := range rec.Decisions {
		row := decisionRow{Slot: dr.Slot, Question: dr.Question, Value: dag.FormatValue(dr.Value), Source: dr.Source, Critical: dr.Critical, Asked: dr.Asked}
		if dr.Event != nil {
			row.Event = dr.Event.Cid.String()
		}
		if row.Source == "" {
			row.Source = "unbound"
		}
		d.Decisions = append(d.Decisions, row)
	}
	for _, ev := range rec.Events {
		who := ev.Who
		if ev.Key != "" {
			who += " (" + ev.Key + ")"
		}
		d.Events = append(d.Events, eventRow{At: ev.At, Node: ev.Node, Kind: ev.Kind, From: ev.From, To: ev.To, Who: who, Reason: ev.Reason})
	}
	states := make(map[string]string, len(rec.Nodes))
	counts := map[string]int{}
	for _, n := range rec.Nodes {
		states[n.Name] = n.State
		counts[n.State]++
	}
	for st, n := range counts {
		d.Counts = append(d.Counts, stateCount{st, n})
	}
	slices.SortFunc(d.Counts, func(a, b stateCount) int { return strings.Compare(a.State, b.State) })
	d.Graph = layout(wo, shape.waves, states, func(node string) string { return nodeHref(run, node) })
	verdicts := map[string]*Verdict{}
	if rv != nil {
		d.Verified = true
		if node, c := rv.FirstFailure(); c != nil {
			d.VerifyProblem = c.Name + ": " + c.Detail
			if node != "" {
				d.VerifyProblem = node + ": " + d.VerifyProblem
			}
		}
		// What the store's runs say of the receipts since: one a recheck
		// took back, here or in another run, reads so, and the outcome
		// does not hold on it.
		standing, err := s.regressions.standing(ctx, st)
		if err != nil {
			return err
		}
		if len(standing.unread) > 0 && d.VerifyProblem == "" {
			d.VerifyProblem = "regressions: the record of run " + strings.Join(standing.unread, ", ") + " cannot be read: whether a recheck took a receipt back there is not known"
		}
		for i := range rv.Nodes {
			nv := &rv.Nodes[i]
			if nv.Verification == nil {
				continue
			}
			v, err := standing.apply(ctx, st, nv.Verification.Receipt, nodeVerdict(rv, nv, verdictOf(nv.Verification)))
			if err != nil {
				return err
			}
			verdicts[nv.Node] = &v
		}
		receipts := make(map[string]cid.Cid, len(rec.Nodes))
		for _, n := range rec.Nodes {
			if n.Receipt != nil {
				receipts[n.Name] = n.Receipt.Cid
			}
		}
		// Upstream first: a node built from work taken back is taken
		// back too.
		for _, wave := range shape.waves {
			for _, node := range wave {
				v := verdicts[node]
				if v == nil {
					continue
				}
				for _, up := range wo.Upstream(node) {
					if uv, c := verdicts[up], receipts[up]; uv != nil && c.Defined() && v.Regressed == "" {
						*v = builtOn(*v, c, *uv)
					}
				}
				if v.Regressed != "" && d.VerifyProblem == "" && states[node] == dag.Done {
					d.VerifyProblem = node + ": not regressed: " + v.Regressed
				}
			}
		}
	}
	d.NodeCount = len(rec.Nodes)
	d.Pages = max(1, (len(rec.Nodes)+tableRows-1)/tableRows)
	pg := 1
	if q := r.URL.Query().Get("page"); q != "" {
		if pg, err = strconv.Atoi(q); err != nil || pg < 1 || pg > d.Pages {
			return badRequest("page %q: want 1 to %d", q, d.Pages)
		}
	}
	for i := 1; i <= d.Pages; i++ {
		d.PageLinks = append(d.PageLinks, pageLink{N: i, Current: i == pg})
	}
	shown := rec.Nodes[(pg-1)*tableRows : min(pg*tableRows, len(rec.Nodes))]
	d.First, d.Last = (pg-1)*tableRows+1, (pg-1)*tableRows+len(shown)
	d.Nodes = make([]nodeRow, 0, len(shown))
	for _, n := range shown {
		row := nodeRow{Name: n.Name, State: n.State, Reason: n.Reason, Attempts: n.Attempts, Memo: n.Memo, Breaker: n.Breaker, Href: nodeHref(run, n.Name)}
		if n.Receipt != nil {
			row.Receipt = n.Receipt.Cid.String()
			row.Verdict = verdicts[n.Name]
		}
		d.Nodes = append(d.Nodes, row)
	}
	return s.render(w, "run", d)
}
