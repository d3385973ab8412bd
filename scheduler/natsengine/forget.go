package natsengine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A worker acks the invocation it answered, and the work queue drops
// it. Should that ack be lost (the worker died right after answering, a
// failover dropped it), the message would be handed out again after the
// ack wait and the invocation, already accepted, run again. So the engine
// takes answered invocations off the queue itself, in batches: a sweep
// asks the stream once which of them it still holds (its first sequence
// and the sequences deleted since), and deletes only those, once they
// have been answered for a sweep's period, time for the worker's own ack
// to land. The period is a tenth of the workers' ack wait (read from
// their consumer), between 50 ms and a second: a sweep comes well inside
// the ack wait. One that cannot reach the stream is tried again on the
// next, for forgetFor.
const (
	forgetFor = time.Minute
	// How often the workers' consumer is asked for its ack wait.
	ackWaitEvery = 10 * time.Second
)

// sweepPeriod is the period of the sweeps for workers' ack wait.
func sweepPeriod(ackWait time.Duration) time.Duration {
	return min(max(ackWait/10, 50*time.Millisecond), time.Second)
}

// forgetter holds the work-stream sequences of answered invocations until
// the stream no longer has them.
type forgetter struct {
	nc     *nats.Conn
	stream jetstream.Stream
	closed <-chan struct{}
	// ackWait returns the workers' ack wait, or an error if there are no
	// workers' consumer yet.
	ackWait func(context.Context) (time.Duration, error)

	mu       sync.Mutex
	answered map[uint64]time.Time // sequence -> when its outcome came
	done     chan struct{}        // closed when run returns
}

func newForgetter(nc *nats.Conn, stream jetstream.Stream, ackWait func(context.Context) (time.Duration, error), closed <-chan struct{}) *forgetter {
	f := &forgetter{nc: nc, stream: stream, ackWait: ackWait, closed: closed, answered: map[uint64]time.Time{}, done: make(chan struct{})}
	go f.run()
	return f
}

// add notes that the invocation at seq was answered.
func (f *forgetter) add(seq uint64) {
	f.mu.Lock()
	f.answered[seq] = time.Now()
	f.mu.Unlock()
}

// pending returns how many answered sequences the stream may still hold.
func (f *forgetter) pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.answered)
}

func (f *forgetter) run() {
	defer close(f.done)
	period := sweepPeriod(0)
	var asked time.Time
	for {
		if time.Since(asked) >= ackWaitEvery && f.nc.IsConnected() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if d, err := f.ackWait(ctx); err == nil {
				period = sweepPeriod(d)
			}
			cancel()
			asked = time.Now() // no workers' consumer yet: the shortest period meanwhile
		}
		select {
		case <-f.closed:
			return
		case <-time.After(period):
			f.sweep(period)
		}
	}
}

// flush is the last sweep, when the engine closes: everything answered
// and still on the queue is deleted now, for at most timeout.
func (f *forgetter) flush(timeout time.Duration) {
	<-f.done
	give := time.Now().Add(timeout)
	for f.pending() > 0 && time.Now().Before(give) {
		f.sweep(0)
		if f.pending() > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// sweep drops the sequences the stream no longer holds and deletes those
// it holds that were answered at least after ago.
func (f *forgetter) sweep(after time.Duration) {
	f.mu.Lock()
	if len(f.answered) == 0 {
		f.mu.Unlock()
		return
	}
	seqs := make([]uint64, 0, len(f.answered))
	now := time.Now()
	for seq, at := range f.answered {
		if now.Sub(at) > forgetFor {
			delete(f.answered, seq) // given up: the server has been away too long
			continue
		}
		seqs = append(seqs, seq)
	}
	f.mu.Unlock()
	if len(seqs) == 0 || !f.nc.IsConnected() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := f.stream.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return
	}
	held := stillHeld(seqs, info.State)
	f.mu.Lock()
	var old []uint64 // held, and answered long enough ago
	for _, seq := range seqs {
		switch at, ok := f.answered[seq]; {
		case !ok:
		case !held[seq]:
			delete(f.answered, seq)
		case now.Sub(at) >= after:
			old = append(old, seq)
		}
	}
	f.mu.Unlock()
	for _, seq := range old {
		err := f.stream.DeleteMsg(ctx, seq)
		if err == nil || errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
			f.mu.Lock()
			delete(f.answered, seq)
			f.mu.Unlock()
		}
	}
}

// stillHeld returns the sequences of seqs that a stream in state st
// holds: from its first sequence to its last, and not deleted.
func stillHeld(seqs []uint64, st jetstream.StreamState) map[uint64]bool {
	deleted := make(map[uint64]bool, len(st.Deleted))
	for _, seq := range st.Deleted {
		deleted[seq] = true
	}
	held := map[uint64]bool{}
	for _, seq := range seqs {
		if st.Msgs > 0 && seq >= st.FirstSeq && seq <= st.LastSeq && !deleted[seq] {
			held[seq] = true
		}
	}
	return held
}
