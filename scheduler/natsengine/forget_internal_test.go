package natsengine

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// An answered sequence is still held by the stream only from its first
// sequence to its last and when not among its deleted ones.
func TestStillHeld(t *testing.T) {
	st := jetstream.StreamState{Msgs: 3, FirstSeq: 10, LastSeq: 20, Deleted: []uint64{12, 15, 11, 13, 14, 16, 19, 18}}
	held := stillHeld([]uint64{5, 9, 10, 12, 17, 20, 21}, st)
	var got []uint64
	for seq := range held {
		got = append(got, seq)
	}
	slices.Sort(got)
	if want := []uint64{10, 17, 20}; !slices.Equal(got, want) {
		t.Errorf("held %v, want %v", got, want)
	}
	if held := stillHeld([]uint64{10, 11}, jetstream.StreamState{Msgs: 0, FirstSeq: 11, LastSeq: 10}); len(held) != 0 {
		t.Errorf("an empty stream holds %v", held)
	}
}

// Sweeps come ten times in an ack wait, between 50 ms and a second apart.
func TestSweepPeriod(t *testing.T) {
	for _, tc := range []struct{ ackWait, want time.Duration }{
		{0, 50 * time.Millisecond}, {200 * time.Millisecond, 50 * time.Millisecond},
		{2 * time.Second, 200 * time.Millisecond}, {15 * time.Second, time.Second}, {time.Hour, time.Second},
	} {
		if got := sweepPeriod(tc.ackWait); got != tc.want {
			t.Errorf("sweepPeriod(%v) = %v, want %v", tc.ackWait, got, tc.want)
		}
	}
}
