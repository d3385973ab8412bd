package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
)

type treeEntry struct {
	Name, Kind, Href, Download, Target string
	Size                               uint64
	Mode                               string
}

type treeData struct {
	pageData
	Root    string
	Path    string  // the directory shown, "" for the root
	Crumbs  []crumb // the path's elements, each a link
	Entries []treeEntry
}

type crumb struct{ Name, Href string }

// maxSymlink bounds the target of a symlink a tree page shows.
const maxSymlink = 4096

// treePage shows a directory of a stored tree. The path is followed one
// element at a time by the names the trees hold, each checked as a
// single path element (cas.CheckName): nothing is looked up on a file
// system, a symlink is shown as its target and never followed, and a
// name with "..", "/" or a NUL names nothing.
func (s *Server) treePage(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	ctx := r.Context()
	root, err := cas.ParseCID(r.PathValue("cid"))
	if err != nil {
		return badRequest("%q is not a CID", r.PathValue("cid"))
	}
	path := strings.Trim(r.PathValue("path"), "/")
	tree, err := cas.LoadTree(ctx, st, root)
	if err != nil {
		return err
	}
	d := treeData{pageData: pageData{Title: "tree " + root.String()}, Root: root.String(), Path: path}
	base := "/trees/" + root.String() + "/"
	d.Crumbs = append(d.Crumbs, crumb{Name: root.String(), Href: base})
	if path != "" {
		walked := ""
		for _, name := range strings.Split(path, "/") {
			if err := cas.CheckName(name); err != nil {
				return notFound("%q is not a name a tree can hold", name)
			}
			e := entryNamed(tree, name)
			if e == nil {
				return notFound("no %q in %s", name, walked)
			}
			if e.Kind != "dir" {
				return notFound("%s/%s is a %s, not a directory", walked, name, e.Kind)
			}
			if tree, err = cas.LoadTree(ctx, st, e.Link.Cid); err != nil {
				return err
			}
			walked = strings.TrimPrefix(walked+"/"+name, "/")
			d.Crumbs = append(d.Crumbs, crumb{Name: name, Href: base + escapePath(walked) + "/"})
		}
	}
	prefix := base
	if path != "" {
		prefix += escapePath(path) + "/"
	}
	for _, e := range tree.Entries {
		te := treeEntry{Name: e.Name, Kind: e.Kind, Size: e.Size, Mode: fmt.Sprintf("%04o", e.Mode)}
		switch e.Kind {
		case "dir":
			te.Href = prefix + url.PathEscape(e.Name) + "/"
		case "file":
			te.Download = downloadHref(e.Link.Cid, e.Name)
		case "symlink":
			te.Target = symlinkTarget(ctx, st, e.Link.Cid)
		}
		d.Entries = append(d.Entries, te)
	}
	return s.render(w, "tree", d)
}

func entryNamed(t *cas.TreeNode, name string) *cas.TreeEntry {
	for i := range t.Entries {
		if t.Entries[i].Name == name {
			return &t.Entries[i]
		}
	}
	return nil
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

func symlinkTarget(ctx context.Context, st cas.Store, c cid.Cid) string {
	data, err := st.Get(ctx, c)
	if err != nil {
		return "(cannot be read: " + err.Error() + ")"
	}
	if len(data) > maxSymlink {
		data = data[:maxSymlink]
	}
	return string(data)
}

// downloadHref is the address of a stored file's download under name.
func downloadHref(c cid.Cid, name string) string {
	return "/files/" + c.String() + "?name=" + url.QueryEscape(name)
}

// fileDownload serves a stored file (hg/file@1) as a download: always
// application/octet-stream, as an attachment, whatever its name or
// bytes, so that no stored file is ever rendered as a page of this
// server's origin. Every chunk is hashed as it is read; a damaged chunk
// met after the headers went aborts the response, so that a client never
// takes a truncated file for a whole one (the length is announced).
func (s *Server) fileDownload(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	ctx := r.Context()
	c, err := cas.ParseCID(r.PathValue("cid"))
	if err != nil {
		return badRequest("%q is not a CID", r.PathValue("cid"))
	}
	fn, err := cas.LoadFileNode(ctx, st, c)
	if err != nil {
		return err
	}
	name := r.URL.Query().Get("name")
	if name == "" || cas.CheckName(name) != nil {
		name = c.String()
	}
	attach(w, name, fn.Size)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := cas.ReadFile(ctx, st, c, w, nil); err != nil {
		s.logf("download %s: %v", c, err)
		panic(http.ErrAbortHandler)
	}
	return nil
}

// logDownload serves a step's output (a raw block, or a file for output
// over one chunk) as a download, as fileDownload does.
func (s *Server) logDownload(w http.ResponseWriter, r *http.Request, st cas.Store) error {
	ctx := r.Context()
	c, err := cas.ParseCID(r.PathValue("cid"))
	if err != nil {
		return badRequest("%q is not a CID", r.PathValue("cid"))
	}
	if c.Type() == cas.DagCBOR {
		return s.fileDownload(w, r, st)
	}
	if c.Type() != cas.Raw {
		return badRequest("%s is neither a raw block nor a file", c)
	}
	data, err := st.Get(ctx, c)
	if err != nil {
		return err
	}
	name := r.URL.Query().Get("name")
	if name == "" || cas.CheckName(name) != nil {
		name = c.String() + ".log"
	}
	attach(w, name, uint64(len(data)))
	if r.Method != http.MethodHead {
		w.Write(data)
	}
	return nil
}

// attach sets the headers of a download named name: an ASCII filename
// with every other byte replaced by '_', and the exact name as RFC 5987's
// filename* (percent-encoded UTF-8).
func attach(w http.ResponseWriter, name string, size uint64) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", contentDisposition(name))
	h.Set("Content-Length", strconv.FormatUint(size, 10))
}

func contentDisposition(name string) string {
	ascii := []byte(name)
	for i, b := range ascii {
		if b < 0x20 || b >= 0x7f || b == '"' || b == '\\' || b == '/' || b == ';' || b == '%' {
			ascii[i] = '_'
		}
	}
	return `attachment; filename="` + string(ascii) + `"; filename*=UTF-8''` + attrEscape(name)
}

// attrEscape percent-encodes every byte of s but RFC 5987's attr-char.
func attrEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$&+-.^_`|~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
