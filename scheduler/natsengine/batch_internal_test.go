package natsengine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Job slots bound what runs at once: many takers, members of batches
// and new messages mixed, never hold more than the slots, and all get
// one in the end.
func TestJobSlotsBound(t *testing.T) {
	const n, takers = 2, 40
	s := newJobSlots(context.Background(), n)
	var active, most atomic.Int32
	var wg sync.WaitGroup
	for i := range takers {
		wg.Go(func() {
			if !s.take(context.Background(), i%3 != 0) {
				t.Error("take without an ended ctx returned false")
				return
			}
			a := active.Add(1)
			for {
				m := most.Load()
				if a <= m || most.CompareAndSwap(m, a) {
					break
				}
			}
			for range 100 {
				if active.Load() > n {
					t.Errorf("%d held at once", active.Load())
				}
			}
			active.Add(-1)
			s.put()
		})
	}
	wg.Wait()
	if m := most.Load(); m > n {
		t.Errorf("%d slots held at once, want at most %d", m, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free != n || s.waiting != 0 {
		t.Errorf("after all: free %d waiting %d, want %d and 0", s.free, s.waiting, n)
	}
}

// A member of a batch waiting for a slot gets the next free one before
// a new message does, whichever asked first; the message gets the one
// after.
func TestJobSlotsMemberFirst(t *testing.T) {
	ctx := context.Background()
	s := newJobSlots(ctx, 1)
	if !s.take(ctx, false) { // the batch's message
		t.Fatal("no slot")
	}
	msgTook := make(chan bool, 1)
	go func() { msgTook <- s.take(ctx, false) }() // the worker's loop, for a new message
	memberTook := make(chan bool, 1)
	go func() { memberTook <- s.take(ctx, true) }()
	waitState(t, s, func() bool { return s.waiting == 1 })
	s.put() // the first member is done
	select {
	case ok := <-memberTook:
		if !ok {
			t.Fatal("the member's take failed")
		}
	case <-msgTook:
		t.Fatal("a new message took the slot a member waited for")
	case <-time.After(30 * time.Second):
		t.Fatal("nobody took the free slot")
	}
	s.mu.Lock()
	if s.free != 0 || s.waiting != 0 {
		t.Errorf("free %d waiting %d, want 0 and 0", s.free, s.waiting)
	}
	s.mu.Unlock()
	s.put() // the member is done
	select {
	case ok := <-msgTook:
		if !ok {
			t.Fatal("the message's take failed")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the message never got the slot")
	}
}

// A take waiting when its ctx ends reports false and takes nothing.
func TestJobSlotsCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := newJobSlots(ctx, 1)
	if !s.take(ctx, false) {
		t.Fatal("no slot")
	}
	res := make(chan bool, 2)
	go func() { res <- s.take(ctx, true) }()
	go func() { res <- s.take(ctx, false) }()
	waitState(t, s, func() bool { return s.waiting == 1 })
	cancel()
	for range 2 {
		select {
		case ok := <-res:
			if ok {
				t.Error("a take after its ctx ended took a slot")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a take did not return when its ctx ended")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.free != 0 || s.waiting != 0 {
		t.Errorf("free %d waiting %d, want 0 and 0", s.free, s.waiting)
	}
}

// waitState waits until cond holds under the slots' lock.
func waitState(t *testing.T, s *jobSlots, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the slots never got there")
		}
		time.Sleep(time.Millisecond)
	}
}

// decodeWant takes a question or an answer of its type, at most
// MaxBatchInvocations invocation ids, strictly encoded, and nothing
// else.
func TestWantDecode(t *testing.T) {
	id := strings.Repeat("ab", 16)
	marshal := func(v any) []byte {
		b, err := cas.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ids, err := decodeWant(marshal(&wireWant{Type: TypeWant, IDs: []string{id}}))
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("good: %v %v", ids, err)
	}
	if ids, err := decodeWant(marshal(&wireWant{Type: TypeWant, IDs: []string{}})); err != nil || len(ids) != 0 {
		t.Fatalf("empty: %v %v", ids, err)
	}
	tooMany := make([]string, MaxBatchInvocations+1)
	for i := range tooMany {
		tooMany[i] = id
	}
	for name, data := range map[string][]byte{
		"not cbor":        []byte("{}"),
		"wrong type":      marshal(&wireWant{Type: TypeReply, IDs: []string{id}}),
		"no type":         marshal(map[string]any{"ids": []string{id}}),
		"bad id":          marshal(&wireWant{Type: TypeWant, IDs: []string{id, "hg.>"}}),
		"upper hex":       marshal(&wireWant{Type: TypeWant, IDs: []string{strings.ToUpper(id)}}),
		"too many":        marshal(&wireWant{Type: TypeWant, IDs: tooMany}),
		"extra field":     marshal(map[string]any{"type": TypeWant, "ids": []string{id}, "more": 1}),
		"ids not strings": marshal(map[string]any{"type": TypeWant, "ids": []int{1}}),
	} {
		if ids, err := decodeWant(data); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v %v, want refused", name, ids, err)
		}
	}
}

// startTestServer runs a JetStream-less NATS server for the test.
func startTestServer(t *testing.T) *nats.Conn {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// A worker's question takes from the answer only ids it asked about:
// an answer naming others gets none of them run; one that does not
// decode strictly, or none at all, has everything run.
func TestWantAnswerJudged(t *testing.T) {
	nc := startTestServer(t)
	var mu sync.Mutex
	var events []WorkerEvent
	w := &worker{nc: nc, o: WorkerOptions{Names: Names{}.withDefaults(), Events: func(ev WorkerEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}}}
	engine := strings.Repeat("e", 32)
	a, b, stranger := strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)
	answer := func(t *testing.T, data []byte) {
		t.Helper()
		sub, err := nc.Subscribe(w.o.wantSubject(engine), func(m *nats.Msg) { _ = m.Respond(data) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe(); _ = nc.Flush() })
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	marshal := func(v any) []byte {
		d, err := cas.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ask := func() map[string]bool {
		return w.wanted(context.Background(), w.o.wantSubject(engine), []string{a, b})
	}

	// No engine listens: everything runs.
	if got := ask(); got != nil {
		t.Errorf("no answer: %v, want nil (run all)", got)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want map[string]bool // nil: run all
	}{
		{"forged ids", marshal(&wireWant{Type: TypeWant, IDs: []string{stranger, a, stranger}}), map[string]bool{a: true}},
		{"none", marshal(&wireWant{Type: TypeWant, IDs: []string{}}), map[string]bool{}},
		{"wrong type", marshal(&wireWant{Type: TypeReply, IDs: []string{a}}), nil},
		{"bad id", marshal(&wireWant{Type: TypeWant, IDs: []string{a, "x"}}), nil},
		{"garbage", []byte("yes"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer(t, tc.data)
			got := ask()
			if (got == nil) != (tc.want == nil) || len(got) != len(tc.want) {
				t.Fatalf("wanted %v, want %v", got, tc.want)
			}
			for id := range got {
				if !tc.want[id] {
					t.Errorf("%s wanted, not in %v", id, tc.want)
				}
			}
			if got[stranger] {
				t.Error("an id not asked about counted as wanted")
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, ev := range events {
		if ev.Event == EventError {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d errors told, want 3 (the answers that did not decode): %v", n, events)
	}
}

// Members a batch expects keep the worker from taking a new message even
// while a slot is free between two of them.
func TestJobSlotsExpected(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := newJobSlots(ctx, 2)
	if !s.take(ctx, false) { // the batch's message, for its first member
		t.Fatal("no slot for the batch")
	}
	s.expect(1) // its second member has yet to ask
	msgTook := make(chan bool, 1)
	go func() { msgTook <- s.take(ctx, false) }()
	select {
	case <-msgTook:
		t.Fatal("a new message took the free slot a member of the batch held was expected to take")
	case <-time.After(200 * time.Millisecond):
	}
	if !s.take(ctx, true) {
		t.Fatal("the expected member got no slot")
	}
	s.put() // a member done: now the message may go
	if !<-msgTook {
		t.Fatal("the new message got no slot")
	}
	if s.free != 0 || s.waiting != 0 || s.expected != 0 {
		t.Errorf("free %d waiting %d expected %d, want 0, 0, 0", s.free, s.waiting, s.expected)
	}
}
