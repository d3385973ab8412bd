package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/spf13/cobra"
)

// actorOf says who records an event from this store: the user, and the
// store's runner key when it has one (none is made for it).
func actorOf(storeDir string) scheduler.Actor {
	a := scheduler.Actor{Who: "unknown"}
	if u, err := user.Current(); err == nil && u.Username != "" {
		a.Who = u.Username
	} else if v := os.Getenv("USER"); v != "" {
		a.Who = v
	}
	if k, err := ledger.LoadKey(keyPath(storeDir)); err == nil {
		a.Key = ledger.FormatPublicKey(k.Public().(ed25519.PublicKey))
	}
	return a
}

// maxWhy bounds the text a person gives as why.
const maxWhy = 4096

// checkWhy refuses a missing or oversized --why: every move a person
// makes outside the scheduler says why.
func checkWhy(cmd *cobra.Command, why string) error {
	switch {
	case strings.TrimSpace(why) == "":
		return usageError{fmt.Errorf("%s: --why TEXT is required: say why, it is recorded in the run", cmd.CommandPath())}
	case len(why) > maxWhy:
		return usageError{fmt.Errorf("%s: --why: %d bytes, at most %d", cmd.CommandPath(), len(why), maxWhy)}
	}
	return nil
}

// stamp is the time of an event recorded now.
func stamp() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// onIdleRun runs fn with the store open for writing, holding run's lock so
// that no process executes the run meanwhile (its commits would undo the
// change).
func onIdleRun(ctx context.Context, g *globals, run string, fn func(st cas.Store, dir string) error) error {
	if err := scheduler.CheckRunID(run); err != nil {
		return usageError{err}
	}
	dir, err := locateStore(g.store)
	if err != nil {
		return err
	}
	unlock, err := lockRun(dir, run)
	if err != nil {
		return err
	}
	defer unlock()
	return g.withStore(false, func(st cas.Store) error { return fn(st, dir) })
}

// notAllowed makes a move the node's state does not allow bad input.
func notAllowed(err error) error {
	if errors.Is(err, scheduler.ErrNotAllowed) {
		return errors.New(strings.TrimSuffix(err.Error(), ": "+scheduler.ErrNotAllowed.Error()))
	}
	return err
}

func newBreakerCmd(g *globals) *cobra.Command {
	var why string
	reset := &cobra.Command{
		Use:   "reset RUN NODE --why TEXT",
		Short: "let a node whose circuit breaker is open run again",
		Long: `A node is started at most max_attempts times in a run (the Work Order's
max_attempts, else its package manifest's, else 3), counted over every
resume and retry: past that its circuit breaker opens, and the node is
blocked, whatever 'hg resume --retry' asks. Reset lets it run again, as many
times more: the next 'hg resume --retry RUN' starts it. The reset is
recorded in the run, with who made it (the user and the store's runner key)
and why; 'hg status RUN' and 'hg report RUN' show it.`,
		Args: exactArgs(2, "RUN and NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkWhy(cmd, why); err != nil {
				return err
			}
			run, node := args[0], args[1]
			return onIdleRun(cmd.Context(), g, run, func(st cas.Store, dir string) error {
				by := actorOf(dir)
				rec, err := scheduler.ResetBreaker(cmd.Context(), st, run, node, by, why, stamp())
				if err != nil {
					return notAllowed(err)
				}
				for _, n := range rec.Nodes {
					if n.Name == node {
						g.ui.printSafe("breaker of %s/%s reset by %s after %d attempts: %s\n", run, node, by.Who, n.Attempts, why)
						g.ui.printSafe("'hg resume --retry %s' runs it again\n", run)
					}
				}
				return nil
			})
		},
	}
	reset.Flags().StringVar(&why, "why", "", "why it may run again (recorded in the run)")
	return groupCmd("breaker", "the circuit breakers of a run's nodes", reset)
}
