package haygent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas/memstore"
	"github.com/haygent/hg/haygent"
)

// runEcho runs the echo Haygent under ctx with the given run time limit.
func runEcho(t *testing.T, ctx context.Context, runTimeout string) error {
	t.Helper()
	pkg, err := haygent.Load(filepath.Join(fixtures, "haygents", "echo"))
	if err != nil {
		t.Fatal(err)
	}
	pkg.Manifest.Timeouts.Run = runTimeout
	_, err = haygent.Run(ctx, pkg, map[string]any{"value": 1}, haygent.Options{Store: memstore.New(), Key: verifyKey})
	return err
}

// A caller that gives up on a run before its first step gets its context's
// error and no receipt: it is not the Haygent's HALT, nor a timeout.
func TestRunCancelledBeforeFirstStep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := runEcho(t, ctx, "1m"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

// A run whose time limit passes before its first step has no chain to
// sign: Run says so instead of making a receipt with no head.
func TestRunOutOfTimeBeforeFirstStep(t *testing.T) {
	err := runEcho(t, context.Background(), "1ns")
	if err == nil || !strings.Contains(err.Error(), "before its first step") || !strings.Contains(err.Error(), "time limit") {
		t.Fatalf("Run = %v, want an error saying the time limit came before the first step", err)
	}
}
