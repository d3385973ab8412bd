package dag_test

import (
	"bytes"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/dag"
	"github.com/ipfs/go-cid"
)

// pkgCIDs gives every Haygent path of w a made-up package CID.
func pkgCIDs(w *dag.WorkOrder) map[string]cid.Cid {
	pkgs := map[string]cid.Cid{}
	for _, n := range w.Nodes {
		pkgs[n.Haygent] = cas.Sum(cid.DagCBOR, []byte("package "+n.Haygent))
	}
	return pkgs
}

func TestObjectRoundTrip(t *testing.T) {
	w := mustParse(t, `{"workorder":"rt","objective":"store me","nodes":{
		"z":{"haygent":"../haygents/echo","needs":["b","a","b"],"input":{
			"ref":{"from":"a","pointer":"/value"},"n":-3,"f":0.25,"big":18446744073709551615,"neg":-18446744073709551616,
			"s":"é\u0000","null":null,"t":true,"arr":[[],{},[1,[2]]],"three":{"from":"a","pointer":"/x","also":1}}},
		"a":{"haygent":"../haygents/echo"},
		"b":{"haygent":"../haygents/other","needs":["a"]}},
		"outcome":{"require":["z","b"]}}`)
	pkgs := pkgCIDs(w)
	o, err := w.Object(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	if o.Type != "hg/workorder@1" {
		t.Errorf("Type = %q", o.Type)
	}
	var names []string
	for _, n := range o.Nodes {
		names = append(names, n.Name)
	}
	if want := []string{"a", "b", "z"}; !reflect.DeepEqual(names, want) {
		t.Errorf("nodes %q, want sorted %q", names, want)
	}
	if got := o.Nodes[2].Needs; !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("needs %q, want sorted and unique", got)
	}
	if got := o.Outcome.Require; !reflect.DeepEqual(got, []string{"b", "z"}) {
		t.Errorf("require %q", got)
	}
	if o.Nodes[1].Haygent.Cid != pkgs["../haygents/other"] {
		t.Errorf("haygent link %v", o.Nodes[1].Haygent)
	}

	data, err := cas.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back dag.Object
	if err := cas.Unmarshal(data, &back); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if !reflect.DeepEqual(back, o) {
		t.Errorf("round trip:\n got %#v\nwant %#v", back, o)
	}
	again, err := cas.Marshal(back)
	if err != nil || !bytes.Equal(again, data) {
		t.Errorf("re-encoding differs: %v", err)
	}
	if b, ok := back.Nodes[2].Input["big"].(*big.Int); !ok || b.String() != "18446744073709551615" {
		t.Errorf("big = %#v", back.Nodes[2].Input["big"])
	}
	// The same Work Order written in another order stores the same bytes.
	w2 := mustParse(t, `{"outcome":{"require":["b","z","z"]},"nodes":{
		"b":{"needs":["a"],"haygent":"../haygents/other"},
		"a":{"haygent":"../haygents/echo"},
		"z":{"input":{"three":{"also":1,"pointer":"/x","from":"a"},"arr":[[],{},[1,[2]]],"t":true,"null":null,"s":"é\u0000",
			"neg":-18446744073709551616,"big":18446744073709551615,"f":2.5e-1,"n":-3,"ref":{"pointer":"/value","from":"a"}},
			"needs":["a","b"],"haygent":"../haygents/echo"}},
		"objective":"store me","workorder":"rt"}`)
	o2, err := w2.Object(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	data2, err := cas.Marshal(o2)
	if err != nil || !bytes.Equal(data2, data) {
		t.Errorf("the same Work Order written differently stores different bytes (%v)", err)
	}

	// The Object does not share the Work Order's maps.
	o.Nodes[2].Input["n"] = "changed"
	if w.Nodes["z"].Input()["n"] != int64(-3) {
		t.Error("Object aliases the Work Order's input")
	}

	// Back to a Work Order.
	w3, err := dag.FromObject(back)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(w3.Waves(), w.Waves()) || w3.Name != "rt" || w3.Objective != "store me" {
		t.Errorf("FromObject: waves %q, want %q", w3.Waves(), w.Waves())
	}
	if w3.Nodes["b"].Haygent != pkgs["../haygents/other"].String() {
		t.Errorf("FromObject haygent %q", w3.Nodes["b"].Haygent)
	}
	if err := w3.Validate(nil); err != nil {
		t.Errorf("FromObject result does not validate: %v", err)
	}
}

func TestObjectEmptyParts(t *testing.T) {
	w := mustParse(t, `{"workorder":"e","objective":"o","nodes":{"a":{"haygent":"h"}}}`)
	o, err := w.Object(pkgCIDs(w))
	if err != nil {
		t.Fatal(err)
	}
	data, err := cas.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back dag.Object
	if err := cas.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, o) {
		t.Errorf("round trip:\n got %#v\nwant %#v", back, o)
	}
	n, err := cas.DecodeNode(data)
	if err != nil {
		t.Fatal(err)
	}
	js, err := cas.EncodeJSON(n)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"hg/workorder@1","nodes":[{"name":"a","input":{},"needs":[],"haygent":{"/":"` +
		pkgCIDs(w)["h"].String() + `"}}],"outcome":{"require":[]},"objective":"o","workorder":"e"}`
	if got := string(js); got != sortedJSON(t, want) {
		t.Errorf("DAG-JSON:\n got %s\nwant %s", got, sortedJSON(t, want))
	}
}

// sortedJSON returns the canonical DAG-JSON of a DAG-JSON text.
func sortedJSON(t *testing.T, s string) string {
	t.Helper()
	v, err := cas.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cas.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestObjectErrors(t *testing.T) {
	w := mustParse(t, `{"workorder":"e","objective":"o","nodes":{"a":{"haygent":"h"},"b":{"haygent":"g"}}}`)
	_, err := w.Object(map[string]cid.Cid{"h": cas.Sum(cid.Raw, nil)})
	if err == nil || err.Error() != `node "b": no package CID for Haygent "g"` {
		t.Errorf("err = %v", err)
	}
	_, err = w.Object(map[string]cid.Cid{"h": cas.Sum(cid.Raw, nil), "g": cid.Undef})
	if err == nil {
		t.Error("undefined CID accepted")
	}

	o, err := w.Object(pkgCIDs(w))
	if err != nil {
		t.Fatal(err)
	}
	bad := o
	bad.Type = "hg/other@1"
	if _, err := dag.FromObject(bad); !errors.Is(err, dag.ErrInvalid) {
		t.Errorf("FromObject of another type: %v", err)
	}
	bad = o
	bad.Nodes = []dag.ObjectNode{o.Nodes[1], o.Nodes[0]}
	if _, err := dag.FromObject(bad); err == nil || !strings.Contains(err.Error(), "not sorted") {
		t.Errorf("FromObject of unsorted nodes: %v", err)
	}
	bad.Nodes = []dag.ObjectNode{o.Nodes[0], o.Nodes[0]}
	if _, err := dag.FromObject(bad); err == nil {
		t.Error("FromObject of repeated nodes accepted")
	}

	// An object with an extra field is not a hg/workorder@1.
	data, err := cas.Marshal(struct {
		dag.Object
		Extra int `cbor:"extra"`
	}{o, 1})
	if err != nil {
		t.Fatal(err)
	}
	var back dag.Object
	if err := cas.Unmarshal(data, &back); !errors.Is(err, cas.ErrNotCanonical) {
		t.Errorf("extra field: %v", err)
	}
}

// TestMaxAttempts: max_attempts is parsed from 1 to 100, stored with the
// Work Order only when given (an order without it keeps its CID), and
// read back; anything else is refused, in the file and in a stored
// object.
func TestMaxAttempts(t *testing.T) {
	doc := func(v string) string {
		return `{"workorder":"w","objective":"o","nodes":{"a":{"haygent":"h"}}` + v + `}`
	}
	w := mustParse(t, doc(`,"max_attempts":5`))
	if w.MaxAttempts != 5 {
		t.Fatalf("MaxAttempts = %d, want 5", w.MaxAttempts)
	}
	o, err := w.Object(pkgCIDs(w))
	if err != nil {
		t.Fatal(err)
	}
	data, err := cas.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var back dag.Object
	if err := cas.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	w2, err := dag.FromObject(back)
	if err != nil || w2.MaxAttempts != 5 {
		t.Fatalf("read back: %d, %v", w2.MaxAttempts, err)
	}
	plain := mustParse(t, doc(""))
	po, err := plain.Object(pkgCIDs(plain))
	if err != nil {
		t.Fatal(err)
	}
	pdata, _ := cas.Marshal(po)
	if bytes.Contains(pdata, []byte("max_attempts")) {
		t.Error("an order without max_attempts stores the field")
	}
	for _, bad := range []string{`0`, `101`, `-1`, `2.5`, `"3"`, `null`, `true`} {
		_, err := dag.Parse([]byte(doc(`,"max_attempts":` + bad)))
		if err == nil || !strings.Contains(err.Error(), `field "max_attempts": want an integer from 1 to 100`) {
			t.Errorf("max_attempts %s: %v", bad, err)
		}
	}
	back.MaxAttempts = 1000
	if _, err := dag.FromObject(back); err == nil {
		t.Error("a stored max_attempts of 1000 was taken")
	}
}
