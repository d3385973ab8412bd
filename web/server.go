package web

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"html/template"
	"log"
	"net/http"
	"strconv"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/verify"
	"github.com/haygent/hg/internal/textsafe"
)

// Config is what a [Server] serves and how.
type Config struct {
	// Open opens the store read-only for one request; the server closes
	// it before the response ends. A store opened for writing is never
	// asked for.
	Open func(ctx context.Context) (cas.Store, error)
	// Trusted returns the runner keys whose receipts verify, read again
	// for each page (a key trusted or untrusted meanwhile counts at
	// once).
	Trusted func() ([]ed25519.PublicKey, error)
	// Executing reports whether a process is executing run now; nil
	// means none is known to. A run recorded running that no process
	// executes is shown as interrupted, and its live view stops.
	Executing func(run string) bool
	// Token, when not empty, is required of every request (see guard.go).
	Token string
	// Hosts, when not empty, are the only Host headers accepted, compared
	// without case: a page reached through another name (DNS rebinding)
	// is refused.
	Hosts []string
	// Poll is how often a live view reads the run's record again; 0 is
	// one second.
	Poll time.Duration
	// ErrorLog, when not nil, receives the errors of requests that failed
	// on the server's side.
	ErrorLog *log.Logger
	// VerifyBudget bounds the time, from its turn at the store, a page
	// spends before it stops checking receipts two links or more
	// upstream of those it shows: past it the page answers 202,
	// "verifying", and reloads itself, the server keeping what it checked
	// (verify.ChainVerifier.Budget). 0 is defaultVerifyBudget; below 0,
	// none.
	VerifyBudget time.Duration
}

// defaultVerifyBudget keeps a page of a node with thousands of receipts
// upstream that the server has not verified yet within the 200 ms of a
// page: about 600 receipts a page on two cores.
const defaultVerifyBudget = 120 * time.Millisecond

// verifyBy is the time by which a page that started at start stops
// checking receipts far upstream (zero: never).
func (s *Server) verifyBy(start time.Time) time.Time {
	switch b := s.cfg.VerifyBudget; {
	case b == 0:
		return start.Add(defaultVerifyBudget)
	case b > 0:
		return start.Add(b)
	}
	return time.Time{}
}

type verifyByKey struct{}

// withVerifyBy is ctx with the time by which its page stops checking
// receipts far upstream.
func withVerifyBy(ctx context.Context, by time.Time) context.Context {
	return context.WithValue(ctx, verifyByKey{}, by)
}

// verifyByOf is the time withVerifyBy set in ctx (zero: none).
func verifyByOf(ctx context.Context) time.Time {
	by, _ := ctx.Value(verifyByKey{}).(time.Time)
	return by
}

// Server serves the pages of one store.
type Server struct {
	cfg   Config
	cache *verify.Cache // signatures and compiled gates: this server's own
	// verdicts holds what this server verified of receipts, which a page
	// takes as verified two links or more upstream of the receipt it
	// shows (that receipt and those it names are verified afresh): see
	// verify.Verdicts.
	verdicts *verify.Verdicts
	// regressions keeps which receipts each run record regressed.
	regressions regressionCache
	shapes      shapeCache // Work Orders' shapes, by CID
	pages       *template.Template
	live        chan struct{} // one token per live view allowed at a time
	gate        *storeGate    // pages hold the store one at a time, leaving writers a turn
	mux         *http.ServeMux
}

// maxLive bounds the live views (event streams) served at once.
const maxLive = 64

// maxVerdicts bounds the receipts whose verdicts the server remembers: a
// few runs of 10,000 nodes, about 60 bytes each.
const maxVerdicts = 1 << 17

// New returns a server of cfg. cfg.Open and cfg.Trusted are required.
func New(cfg Config) (*Server, error) {
	if cfg.Open == nil || cfg.Trusted == nil {
		return nil, errors.New("web: Config.Open and Config.Trusted are required")
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, cache: verify.NewCache(), verdicts: verify.NewVerdicts(maxVerdicts), pages: pages, live: make(chan struct{}, maxLive), mux: http.NewServeMux(), gate: newStoreGate()}
	s.routes()
	return s, nil
}

// routes registers every page. Only GET (and HEAD) are served: nothing
// here changes the store.
func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/runs", http.StatusSeeOther)
	})
	m.HandleFunc("GET /runs", s.withStore(s.runsPage))
	m.HandleFunc("GET /runs/{run}", s.withStore(s.runPage))
	m.HandleFunc("GET /runs/{run}/events", s.runEvents)
	m.HandleFunc("GET /runs/{run}/nodes/{node}", s.withStore(s.nodePage))
	m.HandleFunc("GET /receipts/{cid}", s.withStore(s.receiptPage))
	m.HandleFunc("GET /trees/{cid}/{path...}", s.withStore(s.treePage))
	m.HandleFunc("GET /files/{cid}", s.withStoreStreaming(s.fileDownload))
	m.HandleFunc("GET /logs/{cid}", s.withStoreStreaming(s.logDownload))
	m.HandleFunc("GET /beliefs", s.withStore(s.beliefsPage))
	m.HandleFunc("GET /beliefs/{class}", s.withStore(s.beliefPage))
	m.HandleFunc("GET /metrics", s.withStore(s.metricsPage))
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(staticFS)))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.fail(w, r, http.StatusMethodNotAllowed, errors.New("this view is read-only: only GET and HEAD are served"))
			return
		}
		s.fail(w, r, http.StatusNotFound, errors.New("no such page"))
	})
}

// ServeHTTP checks the request (guard.go) and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setHeaders(w)
	if !s.admit(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// storeHandler serves a page from the store, opened read-only for it.
type storeHandler func(w http.ResponseWriter, r *http.Request, st cas.Store) error

// withStore opens the store for one request, renders the page into
// memory, and closes the store before a byte is sent: a client that reads
// slowly, or never, holds no lock that would keep hg run from the store.
// An error the handler returns becomes an error page.
func (s *Server) withStore(h storeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.gate.enter(r.Context()); err != nil {
			return // the client went away while it waited
		}
		// A page's time counts from its turn at the store; after
		// maxVerifyingLoads loads of "verifying" it has none.
		round := verifyingRound(r)
		by := s.verifyBy(time.Now())
		if round >= maxVerifyingLoads {
			by = time.Time{}
		}
		page := &pageBuffer{header: http.Header{}, code: http.StatusOK}
		err := s.serveFromStore(page, r.WithContext(withVerifyBy(r.Context(), by)), h)
		s.gate.leave()
		if errors.Is(err, verify.ErrOverBudget) {
			s.verifying(w, r, round+1)
			return
		}
		if err != nil {
			s.fail(w, r, statusOf(err), err)
			return
		}
		page.sendTo(w)
	}
}

// withStoreStreaming is withStore for downloads, which go out as they
// are read: the store stays open while a file is sent (outside the gate
// of pages, which a long download would hold up), and a client that
// takes nothing for downloadStall is dropped, closing it.
func (s *Server) withStoreStreaming(h storeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.serveFromStore(&stallWriter{ResponseWriter: w, rc: http.NewResponseController(w)}, r, h); err != nil {
			s.fail(w, r, statusOf(err), err)
		}
	}
}

// serveFromStore opens the store, runs h, and closes the store however h
// ends (an aborted download panics with http.ErrAbortHandler).
func (s *Server) serveFromStore(w http.ResponseWriter, r *http.Request, h storeHandler) (err error) {
	st, err := s.cfg.Open(r.Context())
	if err != nil {
		var busy *cas.BusyError
		if errors.As(err, &busy) {
			return httpError{code: http.StatusServiceUnavailable, err: fmt.Errorf("the store cannot be opened: %w", err)}
		}
		return fmt.Errorf("the store cannot be opened: %w", err)
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			s.logf("close the store: %v", cerr)
		}
	}()
	return h(w, r, st)
}

// httpError is an error with the status its page is served with.
type httpError struct {
	code int
	err  error
}

func (e httpError) Error() string { return e.err.Error() }
func (e httpError) Unwrap() error { return e.err }

func notFound(format string, args ...any) error {
	return httpError{http.StatusNotFound, fmt.Errorf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return httpError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// statusOf is the HTTP status of a handler's error.
func statusOf(err error) int {
	var he httpError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, cas.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, cas.ErrCorrupt), errors.Is(err, cas.ErrNotCanonical), errors.Is(err, cas.ErrInvalid):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// errorData is the error page's.
type errorData struct {
	pageData
	Code    int
	Status  string
	Message string
}

// fail serves an error page. The message may hold ledger text: the
// template escapes it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	if code >= 500 {
		s.logf("%s %s: %v", r.Method, r.URL.Path, err)
	}
	d := errorData{pageData: pageData{Title: http.StatusText(code)}, Code: code, Status: http.StatusText(code), Message: err.Error()}
	var buf bytes.Buffer
	if terr := s.pages.ExecuteTemplate(&buf, "error", d); terr != nil {
		s.logf("render the error page: %v", terr)
		http.Error(w, http.StatusText(code), code)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// render writes a page: into a buffer first, so that a template that
// fails leaves an error page, never half a page.
func (s *Server) render(w http.ResponseWriter, name string, data any) error {
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err := w.Write(buf.Bytes())
	return err
}

// logf logs a server-side error, every argument escaped for a terminal:
// a request's path or a ledger's text cannot write control sequences, or
// a line of its own, to the log hg serve's stderr shows.
func (s *Server) logf(format string, args ...any) {
	if s.cfg.ErrorLog != nil {
		s.cfg.ErrorLog.Print(textsafe.Sprintf(format, args...))
	}
}

// pageData is what every page's frame shows.
type pageData struct {
	Title string
	// Refresh, when not empty, has the browser load it at once: a
	// reference relative to the page (a query of the server's making).
	Refresh string
}

// verifyingData is the page of a request whose verification goes on.
type verifyingData struct {
	pageData
	Checked int // receipts whose own checks the server keeps
}

// maxVerifyingLoads bounds the loads of "verifying" a page answers: the
// next one verifies whole, however long that takes, so that a page whose
// loads stop making progress (what the server keeps emptied under it)
// still ends.
const maxVerifyingLoads = 100

// verifyingParam counts the loads of a page that answered "verifying".
const verifyingParam = "verifying"

// verifyingRound is how many loads of r's page answered "verifying".
func verifyingRound(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get(verifyingParam))
	if err != nil || n < 0 {
		return 0
	}
	return min(n, maxVerifyingLoads)
}

// verifying answers a page whose verification its budget cut short: 202,
// nothing of the page (no verdict, no status), and a reload, which goes
// on from what the server kept, counting the loads.
func (s *Server) verifying(w http.ResponseWriter, r *http.Request, round int) {
	d := verifyingData{pageData: pageData{Title: "verifying", Refresh: "?" + verifyingParam + "=" + strconv.Itoa(round)}, Checked: s.verdicts.Checked()}
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, "verifying", d); err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Retry-After", "0")
	w.WriteHeader(http.StatusAccepted)
	w.Write(buf.Bytes())
}
