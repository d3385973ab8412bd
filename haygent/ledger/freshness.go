package ledger

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/perm"
	"github.com/ipfs/go-cid"
)

// Evidence that a command gave (its exit, its test report) vouches for the
// workspace the command ran on. It records that workspace as a tree
// (Evidence.Workspace) and which of its files it covers (Evidence.Scope):
// by default every file but the step's declared outputs. Each evaluation
// of the gates observes the workspace as it is then ("workspace" evidence),
// and a piece of evidence is STALE when a file it covers differs between
// the two trees: tests that passed before a later step rewrote the code
// vouch for nothing. The verifier re-derives this from the stored trees.

// KindWorkspace is the evidence of the workspace as the gates saw it.
const KindWorkspace = "workspace"

// maxStaleNames is how many changed paths a STALE reason names.
const maxStaleNames = 5

// Scope says which files of its workspace a piece of evidence covers:
// those Covers matches (every file when Covers is empty) and Excludes
// does not.
type Scope struct {
	Covers   []string `cbor:"covers"`
	Excludes []string `cbor:"excludes"`
}

// matcher compiles a scope's globs; they were checked when the package
// was loaded, and a glob that does not compile now matches everything,
// so that nothing escapes the check by a bad pattern.
type matcher struct{ covers, excludes []perm.Glob }

func (s *Scope) matcher() matcher {
	var m matcher
	for _, p := range s.Covers {
		g, err := perm.ParseGlob(p)
		if err != nil {
			return matcher{}
		}
		m.covers = append(m.covers, g)
	}
	for _, p := range s.Excludes {
		if g, err := perm.ParseGlob(p); err == nil {
			m.excludes = append(m.excludes, g)
		}
	}
	return m
}

func (m matcher) covered(path string) bool {
	for _, g := range m.excludes {
		if g.Match(path) {
			return false
		}
	}
	if len(m.covers) == 0 {
		return true
	}
	for _, g := range m.covers {
		if g.Match(path) {
			return true
		}
	}
	return false
}

// vouching is one piece of evidence that vouches for a workspace.
type Vouching struct {
	Ref       string // the evidence's CID
	Step      string
	Workspace cid.Cid
	Scope     Scope
}

// staleEvidence returns, for each piece of evidence in vs whose covered
// files differ between its workspace and now, why it is stale. Trees are
// read from st; one that cannot be read is an error, never fresh.
func StaleEvidence(ctx context.Context, st blockGetter, vs []Vouching, now cid.Cid) (map[string]string, error) {
	out := map[string]string{}
	diffs := map[cid.Cid][]string{} // workspace -> changed paths, computed once
	for _, v := range vs {
		if v.Workspace.Equals(now) {
			continue
		}
		changed, ok := diffs[v.Workspace]
		if !ok {
			var err error
			if changed, err = diffTrees(ctx, st, v.Workspace, now, ""); err != nil {
				return nil, fmt.Errorf("workspace of evidence %s: %w", v.Ref, err)
			}
			diffs[v.Workspace] = changed
		}
		m := v.Scope.matcher()
		var hit []string
		for _, p := range changed {
			if m.covered(p) {
				hit = append(hit, p)
			}
		}
		if len(hit) == 0 {
			continue
		}
		names := strings.Join(hit[:min(len(hit), maxStaleNames)], ", ")
		if len(hit) > maxStaleNames {
			names += fmt.Sprintf(" and %d more", len(hit)-maxStaleNames)
		}
		out[v.Ref] = fmt.Sprintf("the workspace changed since step %s ran: %s", v.Step, names)
	}
	return out, nil
}

// diffTrees lists, in order, the paths under prefix whose entries differ
// between the trees a and b: added, removed, or changed in content, kind
// or mode. Subtrees with one CID are not read.
func diffTrees(ctx context.Context, st blockGetter, a, b cid.Cid, prefix string) ([]string, error) {
	if a.Equals(b) {
		return nil, nil
	}
	ta, err := readTree(ctx, st, a)
	if err != nil {
		return nil, err
	}
	tb, err := readTree(ctx, st, b)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for n := range ta {
		names[n] = true
	}
	for n := range tb {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var out []string
	for _, n := range sorted {
		ea, inA := ta[n]
		eb, inB := tb[n]
		p := prefix + n
		switch {
		case inA && inB && ea.Kind == cas.KindDir && eb.Kind == cas.KindDir:
			sub, err := diffTrees(ctx, st, ea.Link.Cid, eb.Link.Cid, p+"/")
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case inA && inB && ea.Kind == eb.Kind && ea.Mode == eb.Mode && ea.Link.Cid.Equals(eb.Link.Cid):
		default:
			// A directory that appeared or went counts as its own path.
			out = append(out, p)
		}
	}
	return out, nil
}

func readTree(ctx context.Context, st blockGetter, c cid.Cid) (map[string]cas.TreeEntry, error) {
	data, err := st.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	var n cas.TreeNode
	if err := cas.Unmarshal(data, &n); err != nil {
		return nil, fmt.Errorf("tree %s: %w", c, err)
	}
	if n.Type != cas.TypeTree {
		return nil, fmt.Errorf("block %s is a %q, not a tree", c, n.Type)
	}
	m := make(map[string]cas.TreeEntry, len(n.Entries))
	for _, e := range n.Entries {
		m[e.Name] = e
	}
	return m, nil
}

// blockGetter reads blocks: a store, or what a verifier reads from.
type blockGetter interface {
	Get(ctx context.Context, c cid.Cid) ([]byte, error)
}

// onlyWorkspace reports whether evs, the evidence a gates transition
// records, is at most one observation of the workspace: all a gates
// transition may record.
func OnlyWorkspace(evs []*Evidence) bool {
	switch len(evs) {
	case 0:
		return true
	case 1:
		return evs[0] != nil && evs[0].Kind == KindWorkspace && evs[0].Workspace != nil && evs[0].Scope == nil
	}
	return false
}
