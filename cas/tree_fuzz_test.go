package cas_test

import (
	"bytes"
	"testing"

	"github.com/haygent/hg/cas"
)

// FuzzTree: DecodeTree never panics, and a tree it accepts re-encodes to
// the same bytes and holds only safe names.
func FuzzTree(f *testing.F) {
	file := cas.NewBlock(cas.DagCBOR, []byte{0xa0}).CID()
	target := cas.NewBlock(cas.Raw, []byte("a")).CID()
	for _, entries := range [][]cas.TreeEntry{
		nil,
		{{Name: "a", Kind: cas.KindFile, Mode: 0o644, Size: 1, Link: cas.Link{Cid: file}}},
		{
			{Name: "b", Kind: cas.KindDir, Mode: 0o755, Link: cas.Link{Cid: file}},
			{Name: "c", Kind: cas.KindSymlink, Mode: 0o777, Size: 1, Link: cas.Link{Cid: target}},
		},
		{{Name: "..", Kind: cas.KindFile, Link: cas.Link{Cid: file}}},
	} {
		data, err := cas.Marshal(&cas.TreeNode{Type: cas.TypeTree, Entries: entries})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tree, err := cas.DecodeTree(data)
		if err != nil {
			return
		}
		again, err := cas.Marshal(tree)
		if err != nil {
			t.Fatalf("accepted tree does not re-encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted tree re-encodes differently")
		}
		for _, e := range tree.Entries {
			if err := cas.CheckName(e.Name); err != nil {
				t.Fatalf("accepted unsafe name %q", e.Name)
			}
		}
	})
}
