package cas_test

import (
	"fmt"

	"github.com/haygent/hg/cas"
)

func ExampleEncodeNode() {
	link, _ := cas.ParseCID("bafkreiebzrnroamgos2adnbpgw5apo3z4iishhbdx77gldnbk57d4zdio4")
	node := map[string]any{
		"name": "hello",
		"size": int64(5),
		"data": link,
	}
	b, err := cas.EncodeNode(node)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%x\n", b)
	fmt.Println(cas.Sum(cas.DagCBOR, b))

	// Decoding gives the same value back; any other encoding of it is
	// refused.
	v, err := cas.DecodeNode(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(v.(map[string]any)["name"], v.(map[string]any)["size"])
	_, err = cas.DecodeNode([]byte{0x18, 0x05}) // 5 in a two-byte head
	fmt.Println(err)
	// Output:
	// a36464617461d82a5825000155122081cc5b17018674b401b42f35ba07bb79e211239c23bffe658da1577e3e646877646e616d656568656c6c6f6473697a6505
	// bafyreib6i36xnqjs44kr342f7qigkf4mh2mz2tq5exrxokzemt2gyfjdzm
	// hello 5
	// not canonical DAG-CBOR: the head at byte 0 is not the shortest
}

func ExampleDecodeJSON() {
	v, err := cas.DecodeJSON([]byte(`{
		"name": "hello",
		"tags": ["a", "b"],
		"data": {"/": "bafkreiebzrnroamgos2adnbpgw5apo3z4iishhbdx77gldnbk57d4zdio4"},
		"salt": {"/": {"bytes": "AAEC"}},
		"ratio": 2.50
	}`))
	if err != nil {
		panic(err)
	}
	// The canonical DAG-JSON: keys sorted, no whitespace.
	j, _ := cas.EncodeJSON(v)
	fmt.Println(string(j))

	// The same value as DAG-CBOR, the form hg stores.
	b, _ := cas.EncodeNode(v)
	fmt.Println(cas.Sum(cas.DagCBOR, b))

	// For people.
	pretty, _ := cas.EncodeJSONIndent(v, "  ")
	fmt.Println(string(pretty))

	_, err = cas.DecodeJSON([]byte(`{"a": 1, "a": 2}`))
	fmt.Println(err)
	// Output:
	// {"data":{"/":"bafkreiebzrnroamgos2adnbpgw5apo3z4iishhbdx77gldnbk57d4zdio4"},"name":"hello","ratio":2.5,"salt":{"/":{"bytes":"AAEC"}},"tags":["a","b"]}
	// bafyreihxlt63joq5xaycljf4pu5youpz366ao2n3kjzc6xurby567fwyz4
	// {
	//   "data": {"/":"bafkreiebzrnroamgos2adnbpgw5apo3z4iishhbdx77gldnbk57d4zdio4"},
	//   "name": "hello",
	//   "ratio": 2.5,
	//   "salt": {"/":{"bytes":"AAEC"}},
	//   "tags": [
	//     "a",
	//     "b"
	//   ]
	// }
	// dag-json at byte 9: duplicate key "a"
}
