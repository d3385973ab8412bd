package metrics_test

import (
	"context"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/metrics"
	"github.com/haygent/hg/scheduler"
)

// BenchmarkCompute measures the metrics of a store of 20 runs of 3 nodes
// (60 receipts, each verified again on every call).
func BenchmarkCompute(b *testing.B) {
	st := memstore.New()
	plan, err := scheduler.Load("testdata/workorders/easy.json")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s := scheduler.New(scheduler.Options{Store: scheduler.Shared{Store: st}, Key: key, NoCache: true})
	for range 20 {
		id, err := s.Start(ctx, plan, "")
		if err != nil {
			b.Fatal(err)
		}
		if rec, err := s.Execute(ctx, plan, id); err != nil || rec.Status != scheduler.StatusDone {
			b.Fatalf("run %s: %v", id, err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		r, err := metrics.Compute(ctx, st, metrics.Options{Trusted: trusted})
		if err != nil || r.Total.Receipts != 60 || r.Total.Verified != 60 {
			b.Fatalf("%v, %+v", err, r.Total)
		}
	}
}
