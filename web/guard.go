package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
)

// TokenCookie is the cookie that carries the token after a first request
// gave it in the URL.
const TokenCookie = "hg_token"

// contentSecurityPolicy allows nothing that is not the server's own: no
// inline script or style (so that text which escaped its context still
// could not run), no frames, no plugins, no form posts elsewhere.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// setHeaders sets what every response carries.
func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// admit checks the Host header and the token; a request that fails gets
// its error page here and admit returns false.
//
// The token may come as "Authorization: Bearer TOKEN", as a cookie
// (TokenCookie), or once as ?token=TOKEN: then it is set as a cookie
// (HttpOnly, SameSite=Strict) and the browser is sent to the same URL
// without it, so that it stays out of the history and of any link's
// Referer. Tokens are compared in constant time.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	if len(s.cfg.Hosts) > 0 && !hostAllowed(r.Host, s.cfg.Hosts) {
		s.fail(w, r, http.StatusMisdirectedRequest, errors.New("this server does not answer to that host name"))
		return false
	}
	if s.cfg.Token == "" {
		return true
	}
	if q := r.URL.Query(); q.Has("token") {
		if !sameToken(q.Get("token"), s.cfg.Token) {
			s.fail(w, r, http.StatusUnauthorized, errors.New("wrong token"))
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: s.cfg.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		q.Del("token")
		// Back to the same page of this server: a path that begins
		// "//" would name another host.
		to := "/" + strings.TrimLeft(r.URL.EscapedPath(), "/")
		if len(q) > 0 {
			to += "?" + q.Encode()
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return false
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		if t, ok := strings.CutPrefix(auth, "Bearer "); ok && sameToken(t, s.cfg.Token) {
			return true
		}
	} else if c, err := r.Cookie(TokenCookie); err == nil && sameToken(c.Value, s.cfg.Token) {
		return true
	}
	s.fail(w, r, http.StatusUnauthorized, errors.New("this server needs its token: open the URL 'hg serve' printed (…?token=…), or send Authorization: Bearer TOKEN"))
	return false
}

// sameToken compares two tokens in time that depends on neither: their
// digests, of equal length, compared in constant time.
func sameToken(got, want string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// hostAllowed reports whether host (a request's Host header) is one of
// allowed, without case.
func hostAllowed(host string, allowed []string) bool {
	for _, a := range allowed {
		if strings.EqualFold(host, a) {
			return true
		}
	}
	return false
}
