package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/metrics"
)

// metricsGroup is one row of a metrics table: its name (ledger text,
// escaped by the template) and its figures.
type metricsGroup struct {
	Name, Package string
	Runs, Done    string // for a class
	RunToVerified string // for a class
	Cells         []string
}

type metricsData struct {
	pageData
	Since        string
	Columns      []string
	Haygents     []metricsGroup
	Classes      []metricsGroup
	Total        metricsGroup
	Report       *metrics.Report
	UnverifiedBy []kv
}

// metricsPage shows hg metrics: every receipt of the store's runs (those
// started on or after ?since=, a date or an RFC 3339 time) verified again
// against the keys the store trusts now, and the figures counted over
// what held (metrics.Compute). Signature checks come from the server's
// cache; every block is read and hashed again.
func (s *Server) metricsPage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := metrics.ParseSince(v)
		if err != nil {
			return badRequest("since: %v", err)
		}
		since = t
	}
	trusted, err := s.cfg.Trusted()
	if err != nil {
		return err
	}
	rep, err := metrics.Compute(r.Context(), st, metrics.Options{Since: since, Trusted: trusted, Cache: s.cache})
	if err != nil {
		return err
	}
	dur := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	d := metricsData{pageData: pageData{Title: "metrics"}, Since: rep.Since, Columns: metrics.Columns, Report: rep,
		Total: metricsGroup{Name: "all", Cells: rep.Total.Cells(dur)}}
	for i := range rep.Haygents {
		h := &rep.Haygents[i]
		d.Haygents = append(d.Haygents, metricsGroup{Name: h.Haygent, Package: h.Package, Cells: h.Cells(dur)})
	}
	for i := range rep.Classes {
		c := &rep.Classes[i]
		d.Classes = append(d.Classes, metricsGroup{Name: c.Class, Runs: strconv.Itoa(c.Runs), Done: strconv.Itoa(c.Done),
			RunToVerified: c.RunToVerified.Format(dur), Cells: c.Cells(dur)})
	}
	for check, n := range rep.Total.UnverifiedBy {
		d.UnverifiedBy = append(d.UnverifiedBy, kv{check, strconv.Itoa(n)})
	}
	slices.SortFunc(d.UnverifiedBy, func(a, b kv) int { return strings.Compare(a.K, b.K) })
	return s.render(w, "metrics", d)
}
