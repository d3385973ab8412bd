package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/haygent/hg/cas"
)

// StoreDirName is the name of the directory 'hg init' makes a store in.
// Every directory of that name in a workspace, at any depth and in any
// letter case, is taken for an hg store.
const StoreDirName = cas.StoreDirName // one name, wherever a store is looked for or refused

// RuleStore: the path is an hg store or lies inside one. No step sees a
// store or changes it, whatever the grants say: a store holds the
// runner's signing key and the keys it trusts.
const RuleStore = "inside an hg store"

// Fence says which paths of one workspace belong to an hg store: every
// directory named [StoreDirName] at any depth, and the store directories
// it was made with that lie inside the workspace ([Fence.Keep] also knows
// a store by its contents, and its runner key under any name). A nil *Fence fences the
// directories named StoreDirName only.
type Fence struct {
	all    bool          // the workspace itself is, or is inside, a store
	stores []string      // store directories inside the workspace, cleaned, slash-separated
	ids    []fs.FileInfo // the same directories, to know them by identity under any name
	keys   []fs.FileInfo // the runner keys of every store it was made with, inside the workspace or not
}

// NewFence returns the fence of the workspace dir. stores are the paths
// of hg store directories (absolute, or relative to the working
// directory) to keep out besides those named StoreDirName; empty strings
// are ignored, and so are stores outside dir, which no step reaches
// through the workspace. A store that does not exist (yet) is fenced by
// its path alone. A workspace that is a store or lies inside one is
// fenced whole. Paths are compared after symbolic links are resolved, as
// far as they exist.
func NewFence(dir string, stores ...string) (*Fence, error) {
	f := &Fence{}
	ws, err := resolve(dir)
	if err != nil {
		return nil, err
	}
	for _, s := range stores {
		if s == "" {
			continue
		}
		real, err := resolve(s)
		if err != nil {
			return nil, err
		}
		// A hard link to the key may lie anywhere.
		if fi, err := os.Stat(filepath.Join(real, "keys", "runner.key")); err == nil {
			f.keys = append(f.keys, fi)
		}
		if rel, err := filepath.Rel(real, ws); err == nil && !up(rel) {
			f.all = true // the workspace is the store or inside it
		}
		rel, err := filepath.Rel(ws, real)
		if err != nil || up(rel) {
			continue
		}
		f.stores = append(f.stores, filepath.ToSlash(rel))
		fi, err := os.Stat(real)
		if err == nil {
			f.ids = append(f.ids, fi)
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return nil, err
		}
	}
	return f, nil
}

// Stores returns the workspace-relative, slash-separated paths of the
// store directories the fence was made with that lie inside the
// workspace.
func (f *Fence) Stores() []string {
	if f == nil {
		return nil
	}
	return slices.Clone(f.stores)
}

// resolve returns p absolute, with the symbolic links of its longest
// existing part resolved and the rest put back.
func resolve(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// up reports whether a relative path from filepath.Rel leaves its base.
func up(rel string) bool {
	return rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Holds reports whether rel (workspace-relative, cleaned, slash-separated)
// is a store or lies inside one, by its name: a segment named
// StoreDirName, or the path of a store the fence was made with or a path
// beneath it. Letter case is ignored, as some file systems ignore it.
func (f *Fence) Holds(rel string) bool {
	if f != nil && f.all {
		return true
	}
	for seg := range strings.SplitSeq(rel, "/") {
		if strings.EqualFold(seg, StoreDirName) {
			return true
		}
	}
	if f == nil {
		return false
	}
	for _, s := range f.stores {
		if s == "." || len(rel) >= len(s) && strings.EqualFold(rel[:len(s)], s) && (len(rel) == len(s) || rel[len(s)] == '/') {
			return true
		}
	}
	return false
}

// IsStore reports whether fi describes one of the store directories the
// fence was made with, whatever the name it was reached by.
func (f *Fence) IsStore(fi fs.FileInfo) bool {
	if f == nil || fi == nil || !fi.IsDir() {
		return false
	}
	for _, id := range f.ids {
		if os.SameFile(fi, id) {
			return true
		}
	}
	return false
}

// blocks reports whether rel (cleaned) beneath root belongs to a store,
// by its name or because rel or a directory on its way is one of the
// fence's stores. The directories are looked at without following a
// symbolic link; one that does not exist is no store.
func (f *Fence) blocks(root *os.Root, rel string) bool {
	if f.Holds(rel) {
		return true
	}
	if f == nil || len(f.ids) == 0 {
		return false
	}
	for d := rel; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		dir, name, err := openParent(root, d, false)
		if err != nil {
			continue
		}
		fi, err := dir.Lstat(name)
		dir.Close()
		if err == nil && f.IsStore(fi) {
			return true
		}
	}
	return false
}
