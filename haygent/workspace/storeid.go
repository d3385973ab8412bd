package workspace

import (
	"io/fs"
	"os"
	"path"
)

// A store is known by its contents as well as by its name and path: a
// directory that holds keys/runner.key, or store.db beside a keys
// directory, is an hg store whatever it is called. Its runner key is
// known by identity (device and inode) under any name, so a hard link to
// it is the key too.

// IsStoreDir reports whether rel, a directory beneath root, is an hg
// store by its contents.
func IsStoreDir(root *os.Root, rel string) bool {
	if _, err := root.Lstat(path.Join(rel, "keys", "runner.key")); err == nil {
		return true
	}
	db, err := root.Lstat(path.Join(rel, "store.db"))
	if err != nil || !db.Mode().IsRegular() {
		return false
	}
	keys, err := root.Lstat(path.Join(rel, "keys"))
	return err == nil && keys.IsDir()
}

// IsKey reports whether fi describes the runner key of one of the
// stores the fence was made with, under whatever name.
func (f *Fence) IsKey(fi fs.FileInfo) bool {
	if f == nil || fi == nil || !fi.Mode().IsRegular() {
		return false
	}
	for _, k := range f.keys {
		if os.SameFile(fi, k) {
			return true
		}
	}
	return false
}

// Keep returns the Include of a tree stored from the directory root
// opens (cas.TreeOptions.Include): it keeps out what the fence holds by
// name, a directory that is one of its stores or is a store by its
// contents, and a file that is a store's runner key under another name.
// A root that is a store by its contents keeps nothing. Each path kept
// out is passed to left, when it is set. Entries are looked at through
// root, without following a symbolic link.
func (f *Fence) Keep(root *os.Root, left func(p string)) func(p string, isDir bool) bool {
	whole := IsStoreDir(root, ".")
	return func(p string, _ bool) bool {
		out := whole || f.Holds(p)
		if !out {
			fi, err := root.Lstat(p)
			switch {
			case err != nil: // gone since listed: the walk says so
			case fi.IsDir():
				out = f.IsStore(fi) || IsStoreDir(root, p)
			case fi.Mode().IsRegular():
				out = f.IsKey(fi)
			}
		}
		if out && left != nil {
			left(p)
		}
		return !out
	}
}
