package metrics_test

import (
	"context"
	"fmt"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/metrics"
)

// A store with no runs: nothing counted, and the rates that need a
// recorded re-measurement or replay are said to be not measured.
func ExampleCompute() {
	r, err := metrics.Compute(context.Background(), memstore.New(), metrics.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Runs.Counted, r.Total.Receipts)
	for _, n := range r.NotMeasured {
		fmt.Println("not measured:", n.Metric)
	}
	// Output:
	// 0 0
	// not measured: false_pass_rate
	// not measured: replay_agreement
}
