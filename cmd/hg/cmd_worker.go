package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/gcpolicy"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

func newWorkerCmd(g *globals) *cobra.Command {
	var (
		natsURL, adapterSpec, model string
		jobs                        int
	)
	cmd := &cobra.Command{
		Use:   "worker --nats URL [-j N]",
		Short: "run Work Order invocations sent over NATS by 'hg run --nats', signing with this store's runner key",
		Long: `Take Haygent invocations from the NATS JetStream work queue that
'hg run --nats URL' and 'hg resume --nats URL' fill, run each one here, and
send back its receipt and blocks. Every block of an invocation is checked
against its CID first; a tampered invocation is refused. Receipts are signed
with this store's runner key, printed on start: a scheduler accepts them
only if it trusts that key ('hg run --trust KEY'; a scheduler on the same
store trusts it already). Runs until interrupted (SIGINT or SIGTERM); the
invocations still running then are handed back to the queue.`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			defer gcpolicy.Apply()()
			if err := checkJobs(jobs); err != nil {
				return err
			}
			if natsURL == "" {
				return usageError{errors.New("hg worker needs --nats URL")}
			}
			adapter, err := newAdapter(adapterSpec, model)
			if err != nil {
				return err
			}
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			key, err := runnerKey(g, dir)
			if err != nil {
				return err
			}
			nc, err := nats.Connect(natsURL, nats.Name("hg worker"), nats.MaxReconnects(-1))
			if err != nil {
				return fmt.Errorf("nats %s: %w", natsURL, err)
			}
			defer nc.Close()
			g.ui.printf("%s\n", ledger.FormatPublicKey(key.Public().(ed25519.PublicKey)))
			return natsengine.Serve(cmd.Context(), nc, natsengine.WorkerOptions{
				Key: key, Jobs: jobs, Adapter: adapter,
				Log: func(format string, args ...any) {
					fmt.Fprintf(g.ui.stderr, "hg: worker: %s\n", oneLine(fmt.Sprintf(format, args...)))
				},
			})
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats", "", "the NATS server(s), e.g. `URL` nats://127.0.0.1:4222")
	cmd.Flags().IntVarP(&jobs, "jobs", "j", 2, "run at most `N` invocations at once")
	cmd.Flags().StringVar(&adapterSpec, "adapter", "", "who answers slots: script:FILE, exec:CMD or openai")
	cmd.Flags().StringVar(&model, "model", "", "the model, for --adapter openai")
	return cmd
}

// remoteFlags are the flags of 'hg run' and 'hg resume' that send the
// invocations to workers over NATS and say whose receipts to accept.
type remoteFlags struct {
	natsURL string
	trust   []string
}

func (r *remoteFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&r.natsURL, "nats", "", "run the invocations on 'hg worker' processes reached through NATS `URL` instead of in this process")
	cmd.Flags().StringArrayVar(&r.trust, "trust", nil, "also accept receipts signed by `PUBKEY` (ed25519:..., as 'hg worker' prints it); repeatable")
}

// apply adds the trusted keys to opts and, with --nats, sets its engine;
// the returned function closes what it opened.
func (r *remoteFlags) apply(opts *scheduler.Options) (func(), error) {
	for _, s := range r.trust {
		k, err := ledger.ParsePublicKey(s)
		if err != nil {
			return nil, usageError{fmt.Errorf("--trust: %w", err)}
		}
		opts.Trusted = append(opts.Trusted, k)
	}
	if r.natsURL == "" {
		return func() {}, nil
	}
	nc, err := nats.Connect(r.natsURL, nats.Name("hg run"))
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", r.natsURL, err)
	}
	e, err := natsengine.New(nc, natsengine.Options{})
	if err != nil {
		nc.Close()
		return nil, err
	}
	opts.Engine = e
	return func() {
		e.Close()
		nc.Close()
	}, nil
}
