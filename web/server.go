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
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/verify"
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
}

// Server serves the pages of one store.
type Server struct {
	cfg    Config
	cache  *verify.Cache // signatures and compiled gates: this server's own
	shapes shapeCache    // Work Orders' shapes, by CID
	pages  *template.Template
	live   chan struct{} // one token per live view allowed at a time
	mux    *http.ServeMux
}

// maxLive bounds the live views (event streams) served at once.
const maxLive = 64

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
	s := &Server{cfg: cfg, cache: verify.NewCache(), pages: pages, live: make(chan struct{}, maxLive), mux: http.NewServeMux()}
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
	m.HandleFunc("GET /files/{cid}", s.withStore(s.fileDownload))
	m.HandleFunc("GET /logs/{cid}", s.withStore(s.logDownload))
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

// withStore opens the store for one request and closes it when the page
// is written. An error the handler returns becomes an error page.
func (s *Server) withStore(h storeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, err := s.cfg.Open(r.Context())
		if err != nil {
			var busy *cas.BusyError
			code := http.StatusInternalServerError
			if errors.As(err, &busy) {
				code = http.StatusServiceUnavailable
			}
			s.fail(w, r, code, fmt.Errorf("the store cannot be opened: %w", err))
			return
		}
		err = h(w, r, st)
		if cerr := st.Close(); err == nil && cerr != nil {
			s.logf("close the store: %v", cerr)
		}
		if err != nil {
			s.fail(w, r, statusOf(err), err)
		}
	}
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

func (s *Server) logf(format string, args ...any) {
	if s.cfg.ErrorLog != nil {
		s.cfg.ErrorLog.Printf(format, args...)
	}
}

// pageData is what every page's frame shows.
type pageData struct {
	Title string
}
