package haygent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
	"github.com/ipfs/go-cid"
)

// runBeforeFirstStep runs the echo Haygent with one upstream receipt whose
// re-check does what check says, before any step has run.
func runBeforeFirstStep(t *testing.T, ctx context.Context, runTimeout string, check func(context.Context, cid.Cid) error) error {
	t.Helper()
	pkg, err := haygent.Load(filepath.Join(fixtures, "haygents", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	pkg.Manifest.Timeouts.Run = runTimeout
	st := memstore.New()
	_, err = haygent.Run(ctx, pkg, map[string]any{"value": 1}, haygent.Options{
		Store: st, Key: verifyKey, Upstream: []cid.Cid{cas.Sum(cas.Raw, []byte("upstream"))}, CheckUpstream: check,
	})
	return err
}

// A caller that gives up on a run before its first step gets its context's
// error and no receipt: it is not the Haygent's HALT, nor a timeout.
func TestRunCancelledBeforeFirstStep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := runBeforeFirstStep(t, ctx, "1m", func(context.Context, cid.Cid) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// A run whose time limit passes before its first step has no chain to
// sign: Run says so instead of making a receipt with no head.
func TestRunOutOfTimeBeforeFirstStep(t *testing.T) {
	err := runBeforeFirstStep(t, context.Background(), "20ms", func(ctx context.Context, _ cid.Cid) error {
		<-ctx.Done() // the run's own time limit
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "before its first step") || !strings.Contains(err.Error(), "time limit") {
		t.Fatalf("Run = %v, want an error saying the time limit came before the first step", err)
	}
}

// A re-check of an upstream receipt that the run's time limit cuts short
// says nothing against that receipt: no UPSTREAM halt is recorded, and
// with no step run there is no receipt.
func TestUpstreamRecheckOutOfTime(t *testing.T) {
	err := runBeforeFirstStep(t, context.Background(), "20ms", func(ctx context.Context, _ cid.Cid) error {
		<-ctx.Done()
		return ctx.Err()
	})
	if err == nil || !strings.Contains(err.Error(), "before its first step") || !strings.Contains(err.Error(), "time limit") {
		t.Fatalf("Run = %v, want an error saying the time limit came before the first step", err)
	}
}

// A caller that gives up during an upstream re-check gets its context's
// error, not an UPSTREAM halt.
func TestUpstreamRecheckCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := runBeforeFirstStep(t, ctx, "1m", func(ctx context.Context, _ cid.Cid) error {
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}
