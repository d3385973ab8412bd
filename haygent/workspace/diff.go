package workspace

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// ChangeKind says what happened to a path in the scratch directory.
type ChangeKind string

// Kinds of change.
const (
	Create  ChangeKind = "create"  // a regular file that was not copied in
	Modify  ChangeKind = "modify"  // a copied file whose digest or permission bits differ
	Delete  ChangeKind = "delete"  // a copied file that is gone, or no longer a regular file
	Symlink ChangeKind = "symlink" // a symbolic link (never followed)
	Special ChangeKind = "special" // a named pipe, socket or device
)

// Change is one difference between a [Manifest] and a scratch directory.
type Change struct {
	Kind ChangeKind `json:"kind"`
	Path string     `json:"path"`

	// Before is the file as copied in, for Modify and Delete, and for a
	// Symlink or Special that took the place of a copied file; else nil.
	Before *FileState `json:"before,omitempty"`

	// After is the file in the scratch directory, for Create and Modify;
	// else nil.
	After *FileState `json:"after,omitempty"`

	// Target is what a Symlink points at, as read with readlink.
	Target string `json:"target,omitempty"`
}

// Changes is a list of changes sorted by path.
type Changes []Change

// Diff compares the scratch directory dir, after a step ran in it, with
// before, the manifest [Scratch] returned. It reports every regular file
// created or modified (by digest and permission bits), every copied file
// deleted, and every symbolic link, named pipe, socket or device, sorted
// by path. A copied file replaced by a directory is a Delete (and what the
// directory holds, Creates); a copied file replaced by a symbolic link is
// one Symlink change with Before set. Directories themselves, empty or
// not, are not changes. Diff walks dir through an [os.Root] and never
// follows a symbolic link. Files a step made inside a path that belongs
// to an hg store (see [Fence]) are listed like any others, so that
// [Apply] denies them and the denials are recorded.
func Diff(before *Manifest, dir string) (Changes, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var files map[string]FileState
	if before != nil {
		files = before.Files
	}
	seen := map[string]bool{}
	var out Changes
	prior := func(rel string) *FileState {
		if st, ok := files[rel]; ok {
			seen[rel] = true
			return &st
		}
		return nil
	}
	err = walk(root, ".", nil, func(e entry) error {
		switch {
		case e.mode.IsRegular():
			f, st, err := openRegular(e.dir, e.name)
			if err != nil {
				return fmt.Errorf("workspace: diff: %s: %w", e.rel, err)
			}
			defer f.Close()
			after, err := hashOpen(f, st.Mode().Perm())
			if err != nil {
				return fmt.Errorf("workspace: diff: %s: %w", e.rel, err)
			}
			b := prior(e.rel)
			switch {
			case b == nil:
				out = append(out, Change{Kind: Create, Path: e.rel, After: &after})
			case *b != after:
				out = append(out, Change{Kind: Modify, Path: e.rel, Before: b, After: &after})
			}
		case e.mode&os.ModeSymlink != 0:
			target, err := e.dir.Readlink(e.name)
			if err != nil {
				return fmt.Errorf("workspace: diff: %s: %w", e.rel, err)
			}
			out = append(out, Change{Kind: Symlink, Path: e.rel, Before: prior(e.rel), Target: target})
		default:
			out = append(out, Change{Kind: Special, Path: e.rel, Before: prior(e.rel)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for rel, st := range files {
		if !seen[rel] {
			out = append(out, Change{Kind: Delete, Path: rel, Before: &st})
		}
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}
