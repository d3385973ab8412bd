package web

import (
	"bytes"
	"net/http"
	"time"
)

// pageBuffer holds a page's response until the store is closed: the
// header, the status and the body, sent with sendTo.
type pageBuffer struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (p *pageBuffer) Header() http.Header         { return p.header }
func (p *pageBuffer) WriteHeader(code int)        { p.code = code }
func (p *pageBuffer) Write(b []byte) (int, error) { return p.body.Write(b) }

// sendTo writes the page to w.
func (p *pageBuffer) sendTo(w http.ResponseWriter) {
	for k, vs := range p.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(p.code)
	_, _ = w.Write(p.body.Bytes())
}

// downloadStall is how long a download's client may take no bytes before
// it is dropped (and the store it holds open closed).
const downloadStall = 15 * time.Second

// stallWriter sets a write deadline before each write: a client that
// stops reading ends its download, not the store's availability.
type stallWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (s *stallWriter) Write(b []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(downloadStall))
	return s.ResponseWriter.Write(b)
}
