package cas_test

import (
	"bytes"
	"fmt"
	"maps"
	"testing"

	"github.com/haygent/hg/cas"
)

// checkMapEntries checks, for every key of m (data being m's canonical
// encoding), that WithoutEntry gives the encoding of m less that key and
// that WithEntry puts the entry back to give data again.
func checkMapEntries(t *testing.T, data []byte, m map[string]any) {
	t.Helper()
	for k, v := range m {
		less := maps.Clone(m)
		delete(less, k)
		want, err := cas.EncodeNode(less)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := cas.WithoutEntry(data, k)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("WithoutEntry(%x, %q) = %x, %v; want %x", data, k, got, ok, want)
		}
		value, err := cas.EncodeNode(v)
		if err != nil {
			t.Fatal(err)
		}
		back, ok := cas.WithEntry(got, k, value)
		if !ok || !bytes.Equal(back, data) {
			t.Fatalf("WithEntry(%x, %q, %x) = %x, %v; want %x", got, k, value, back, ok, data)
		}
		if _, ok := cas.WithEntry(data, k, value); ok {
			t.Fatalf("WithEntry(%x, %q) added a key the map has", data, k)
		}
		str, isText := v.(string)
		if got, ok := cas.TextEntry(data, k); ok != isText || got != str {
			t.Fatalf("TextEntry(%x, %q) = %q, %v; want %q, %v", data, k, got, ok, str, isText)
		}
		b, isBytes := v.([]byte)
		if got, ok := cas.BytesEntry(data, k); ok != isBytes || !bytes.Equal(got, b) {
			t.Fatalf("BytesEntry(%x, %q) = %x, %v; want %x, %v", data, k, got, ok, b, isBytes)
		}
	}
	if _, ok := cas.BytesEntry(data, "no such key, surely"); ok {
		t.Fatalf("BytesEntry(%x) found a key the map lacks", data)
	}
	if _, ok := cas.WithoutEntry(data, "no such key, surely"); ok {
		t.Fatalf("WithoutEntry(%x) removed a key the map lacks", data)
	}
}

// TestMapEntries covers maps on both sides of the head's widths (23 and 24
// entries, 255 and 256) and keys of every order, with nested values and
// links.
func TestMapEntries(t *testing.T) {
	link := cas.Sum(cas.Raw, []byte("x"))
	for _, n := range []int{1, 2, 23, 24, 25, 255, 256} {
		m := map[string]any{}
		for i := range n {
			key := fmt.Sprintf("%0*d", 1+i%5, i) // keys of several lengths
			switch i % 4 {
			case 0:
				m[key] = int64(i)
			case 1:
				m[key] = link
			case 2:
				if i%8 == 2 {
					m[key] = "text " + key
					break
				}
				m[key] = map[string]any{"a": []any{"b", int64(-1), nil}}
			default:
				m[key] = []byte(key)
			}
		}
		data, err := cas.EncodeNode(m)
		if err != nil {
			t.Fatal(err)
		}
		checkMapEntries(t, data, m)
	}
}

func TestMapEntriesRefuse(t *testing.T) {
	m, err := cas.EncodeNode(map[string]any{"a": int64(1), "bb": "x"})
	if err != nil {
		t.Fatal(err)
	}
	list, err := cas.EncodeNode([]any{"a", int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	one := []byte{0x01}
	for name, data := range map[string][]byte{
		"not a map": list,
		"trailing":  append(append([]byte{}, m...), 0x00),
		"truncated": m[:len(m)-1],
		"empty":     nil,
		"int key":   {0xa1, 0x01, 0x01},
	} {
		if out, ok := cas.WithoutEntry(data, "a"); ok {
			t.Errorf("%s: WithoutEntry = %x, want a refusal", name, out)
		}
		if out, ok := cas.WithEntry(data, "c", one); ok {
			t.Errorf("%s: WithEntry = %x, want a refusal", name, out)
		}
		if out, ok := cas.BytesEntry(data, "bb"); ok {
			t.Errorf("%s: BytesEntry = %x, want a refusal", name, out)
		}
	}
}
