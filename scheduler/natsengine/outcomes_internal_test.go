package natsengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/haygent/hg/cas"
)

// published is one message a batcher published.
type published struct {
	subject, msgID string
	data           []byte
}

// A batcher sends a reply at once when none is being published to the
// same engine, and gathers the replies that come while one is: they go
// as one strictly decodable batch on a batch subject of that engine,
// every member as it was given, at most MaxBatchOutcomes and the limit
// a message. A failed publication fails every reply it carried (so each
// is handed back, none lost), and replies to another engine are not
// mixed in.
func TestBatcherGathers(t *testing.T) {
	var mu sync.Mutex
	var got []published
	first := make(chan struct{})   // the first publication started
	release := make(chan struct{}) // and may end
	fail := errors.New("no server")
	var calls int
	publish := func(_ context.Context, subject, msgID string, data []byte) error {
		mu.Lock()
		calls++
		n := calls
		got = append(got, published{subject, msgID, data})
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release
		}
		if strings.Contains(subject, "failing") {
			return fail
		}
		return nil
	}
	const limit = 4096
	b := newBatcher(context.Background(), limit, publish)
	reply := func(i int, pad int) (wireReply, []byte) {
		r := wireReply{Type: TypeReply, ID: fmt.Sprintf("%032x", i), State: StateError, Worker: "w", Error: strings.Repeat("x", pad)}
		data, err := cas.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		return r, data
	}
	const engine = "hg.result.aaaa."
	send := func(prefix string, i, pad int) chan error {
		r, data := reply(i, pad)
		done := make(chan error, 1)
		go func() { done <- b.send(prefix, prefix+r.ID, r.ID+"-error", r, data) }()
		return done
	}

	// The first goes alone, at once, on its own subject.
	d0 := send(engine, 0, 0)
	<-first
	// Meanwhile: MaxBatchOutcomes+3 small ones, then two that fill the
	// limit, and one to another engine that fails.
	var ds []chan error
	waitQueued := func(prefix string, n int) {
		for {
			b.mu.Lock()
			q := b.queues[prefix]
			k := 0
			if q != nil {
				k = len(q.pending)
			}
			b.mu.Unlock()
			if k >= n {
				return
			}
			runtime.Gosched()
		}
	}
	for i := range MaxBatchOutcomes + 3 {
		ds = append(ds, send(engine, 1+i, 0))
		waitQueued(engine, i+1)
	}
	for i := range 2 {
		ds = append(ds, send(engine, 100+i, limit/2))
		waitQueued(engine, MaxBatchOutcomes+4+i)
	}
	dOther := send("hg.result.failing.", 200, 0)
	if err := <-dOther; err == nil {
		t.Fatal("a reply whose publication failed was reported stored")
	}
	close(release)
	if err := <-d0; err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if err := <-d; err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	var sizes []int
	for _, p := range got {
		if strings.HasPrefix(p.subject, "hg.result.failing.") {
			continue
		}
		if len(p.data) > limit {
			t.Errorf("a message of %d bytes, over the limit %d", len(p.data), limit)
		}
		token := lastToken(p.subject)
		if !strings.HasPrefix(token, batchToken) {
			r, err := decodeReply(p.data)
			if err != nil || token != r.ID || p.msgID != r.ID+"-error" {
				t.Fatalf("a single reply on %s, id %s: %v", p.subject, p.msgID, err)
			}
			seen[r.ID]++
			sizes = append(sizes, 1)
			continue
		}
		if p.subject != engine+token || p.msgID != token || !validID(strings.TrimPrefix(token, batchToken)) {
			t.Fatalf("a batch on %s, message id %s", p.subject, p.msgID)
		}
		members, err := decodeOutcomes(p.data)
		if err != nil {
			t.Fatalf("a batch does not decode: %v", err)
		}
		for _, m := range members {
			if m.Type != TypeReply || m.State != StateError {
				t.Fatalf("member %+v", m)
			}
			seen[m.ID]++
		}
		sizes = append(sizes, len(members))
	}
	if len(seen) != MaxBatchOutcomes+6 {
		t.Errorf("%d replies published, want %d", len(seen), MaxBatchOutcomes+6)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("reply %s published %d times", id, n)
		}
	}
	// 1 alone, then a full batch, then the 3 small ones left with the
	// first big one, then the second big one (the limit).
	want := fmt.Sprint([]int{1, MaxBatchOutcomes, 4, 1})
	if fmt.Sprint(sizes) != want {
		t.Errorf("messages of %v replies, want %s", sizes, want)
	}
}

// A batch made of its members' own encodings is byte for byte the batch
// encoded whole, and decodes strictly.
func TestEncodedOutcomesSameBytes(t *testing.T) {
	var replies []wireReply
	var raws []cbor.RawMessage
	for i := range 3 {
		r := wireReply{Type: TypeReply, ID: newID(), State: StateDone, Worker: "ed25519:w",
			Receipt: &cas.Link{Cid: cas.Sum(cas.DagCBOR, []byte{byte(i)})},
			Blocks:  []wireBlock{{CID: cas.Sum(cas.DagCBOR, []byte{byte(i)}).Bytes(), Data: []byte{byte(i)}}}}
		if i == 2 {
			r = wireReply{Type: TypeReply, ID: newID(), State: StateError, Worker: "ed25519:w", Error: "no"}
		}
		data, err := cas.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		replies, raws = append(replies, r), append(raws, data)
	}
	whole, err := cas.Marshal(&wireOutcomes{Type: TypeOutcomes, Outcomes: replies})
	if err != nil {
		t.Fatal(err)
	}
	parts, err := cas.Marshal(&encodedOutcomes{Type: TypeOutcomes, Outcomes: raws})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole, parts) {
		t.Fatalf("a batch of encoded members differs from the batch encoded whole")
	}
	got, err := decodeOutcomes(parts)
	if err != nil || len(got) != 3 || got[2].Error != "no" {
		t.Fatalf("decode: %v, %+v", err, got)
	}
}
