package web

import (
	"embed"
	"html/template"
	"io/fs"
	"strings"
)

//go:embed assets
var assets embed.FS

// staticFS holds the style sheet and the script, served under /static/.
var staticFS = mustSub(assets, "assets/static")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}

// parsePages parses the page templates. html/template escapes every
// value for the context it lands in: element text, attribute, URL, the
// text of an SVG element.
func parsePages() (*template.Template, error) {
	return template.New("pages").Funcs(template.FuncMap{
		"stateClass": stateClass,
		"short":      shortCID,
		"svg":        svgHTML,
	}).ParseFS(assets, "assets/*.html")
}

// stateClass is the CSS class of a node state: "s-" and the state when
// it is one hg knows, else "s-other", so that no record can name a class.
func stateClass(state string) string {
	switch state {
	case "pending", "ready", "active", "concluded", "done", "blocked", "failed", "deleted", "rewritten", "unknown",
		"running", "halted", "cancelled", "interrupted", "unreadable":
		return "s-" + state
	}
	return "s-other"
}

// shortCID shortens a CID for a table cell; its title holds it whole.
func shortCID(s string) string {
	if len(s) <= 16 || !strings.HasPrefix(s, "baf") {
		return s
	}
	return s[:8] + "…" + s[len(s)-6:]
}
