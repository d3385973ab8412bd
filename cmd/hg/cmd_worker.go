package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/gcpolicy"
	"github.com/haygent/hg/scheduler"
	"github.com/haygent/hg/scheduler/natsengine"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
)

// natsOptions are the connection options of every hg process that talks
// to NATS: it never stops reconnecting (a server down for longer than the
// client's default two minutes must not strand a run or a worker), and
// waits $HG_NATS_RECONNECT_WAIT (default 2s) between attempts.
func natsOptions(name string) []nats.Option {
	wait := 2 * time.Second
	if d, err := time.ParseDuration(os.Getenv("HG_NATS_RECONNECT_WAIT")); err == nil && d > 0 {
		wait = d
	}
	return []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(wait)}
}

// natsError says which server an error of the NATS engine is about.
func natsError(url string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("nats %s: %w", url, err)
}

// workerLog writes a worker's events, one line each with its time: on
// stderr as "hg: worker: TIME EVENT ...", or with --json on stdout as
// one JSON object per line.
type workerLog struct {
	mu     sync.Mutex
	w      io.Writer
	asJSON bool
}

// workerJSON is one line of 'hg worker --json'.
type workerJSON struct {
	Time    string `json:"time"`
	Event   string `json:"event"`
	ID      string `json:"id,omitempty"`
	Run     string `json:"run,omitempty"`
	Node    string `json:"node,omitempty"`
	Receipt string `json:"receipt,omitempty"`
	Worker  string `json:"worker,omitempty"`
	Server  string `json:"server,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (l *workerLog) event(ev natsengine.WorkerEvent, worker, server string) {
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	stamp := ev.Time.UTC().Format(time.RFC3339Nano)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.asJSON {
		enc := json.NewEncoder(l.w)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(workerJSON{Time: stamp, Event: ev.Event, ID: ev.ID, Run: ev.Run, Node: ev.Node,
			Receipt: ev.Receipt, Worker: worker, Server: server, Error: ev.Error})
		return
	}
	line := ev.String()
	if worker != "" {
		line += " " + worker
	}
	if server != "" {
		line += " " + server
	}
	fmt.Fprintf(l.w, "hg: worker: %s %s\n", stamp, oneLine(line))
}

func newWorkerCmd(g *globals) *cobra.Command {
	var (
		natsURL, adapterSpec, model string
		jobs                        int
		asJSON                      bool
	)
	cmd := &cobra.Command{
		Use:   "worker --nats URL [-j N] [--json]",
		Short: "run Work Order invocations sent over NATS by 'hg run --nats', signing with this store's runner key",
		Long: `Take Haygent invocations from the NATS JetStream work queue that
'hg run --nats URL' and 'hg resume --nats URL' fill, run each one here, and
send back its receipt and blocks. A node's workspace comes block by block
from the server's object store, each block fetched once and kept in memory
for the next node that needs it. Every block of an invocation is checked
against its CID first; a tampered invocation is refused. Receipts are signed
with this store's runner key, printed on start: a scheduler accepts them
only if it trusts that key ('hg key trust KEY' in the scheduler's store, or
'hg run --trust KEY'; a scheduler on the same store trusts it already). Runs
until interrupted (SIGINT or SIGTERM); the invocations still running then
are handed back to the queue. The server must have JetStream
('nats-server -js'); the worker reconnects to it for as long as it takes.

Each event is a line on stderr with its time: connected, took, done,
failed, refused, dropped, stopped, handed back, disconnected, reconnected,
error. With --json they go to stdout instead, one JSON object per line
({"time", "event", "id", "run", "node", "receipt", "error", ...}), the
first of them {"event": "started", "worker": KEY}.`,
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
			log := &workerLog{w: g.ui.stderr, asJSON: asJSON}
			if asJSON {
				log.w = g.ui.stdout
			}
			opts := append(natsOptions("hg worker"),
				nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
					ev := natsengine.WorkerEvent{Event: "disconnected", Error: "reconnecting"}
					if err != nil {
						ev.Error = err.Error() + "; reconnecting"
					}
					log.event(ev, "", "")
				}),
				nats.ReconnectHandler(func(c *nats.Conn) {
					log.event(natsengine.WorkerEvent{Event: "reconnected"}, "", c.ConnectedUrlRedacted())
				}))
			nc, err := nats.Connect(natsURL, opts...)
			if err != nil {
				return fmt.Errorf("nats %s: %w", natsURL, err)
			}
			defer nc.Close()
			pub := ledger.FormatPublicKey(key.Public().(ed25519.PublicKey))
			if asJSON {
				log.event(natsengine.WorkerEvent{Event: "started"}, pub, "")
			} else {
				g.ui.printf("%s\n", pub)
			}
			return natsError(natsURL, natsengine.Serve(cmd.Context(), nc, natsengine.WorkerOptions{
				Key: key, Jobs: jobs, Adapter: adapter,
				Events: func(ev natsengine.WorkerEvent) {
					server := ""
					if ev.Event == natsengine.EventConnected {
						server = nc.ConnectedUrlRedacted()
					}
					log.event(ev, "", server)
				},
			}))
		},
	}
	cmd.Flags().StringVar(&natsURL, "nats", "", "the NATS server(s), e.g. `URL` nats://127.0.0.1:4222")
	cmd.Flags().IntVarP(&jobs, "jobs", "j", 2, "run at most `N` invocations at once")
	cmd.Flags().StringVar(&adapterSpec, "adapter", "", "who answers slots: script:FILE, exec:CMD or openai")
	cmd.Flags().StringVar(&model, "model", "", "the model, for --adapter openai")
	cmd.Flags().BoolVar(&asJSON, "json", false, "log events on stdout as JSON, one object per line")
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

// apply adds the trusted keys to opts: the store's (its runner key and
// those 'hg key trust' added, keys/trusted) and --trust's; with --nats
// it sets its engine, which tells notify what it notices. The returned
// function closes what it opened.
func (r *remoteFlags) apply(opts *scheduler.Options, storeDir string, notify func(natsengine.Notice)) (func(), error) {
	for _, s := range r.trust {
		k, err := ledger.ParsePublicKey(s)
		if err != nil {
			return nil, usageError{fmt.Errorf("--trust: %w", err)}
		}
		opts.Trusted = append(opts.Trusted, k)
	}
	stored, err := storeTrust(storeDir)
	if err != nil {
		return nil, err
	}
	opts.Trusted = append(opts.Trusted, stored...)
	if r.natsURL == "" {
		return func() {}, nil
	}
	nc, err := nats.Connect(r.natsURL, natsOptions("hg run")...)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", r.natsURL, err)
	}
	e, err := natsengine.New(nc, natsengine.Options{Notify: notify})
	if err != nil {
		nc.Close()
		return nil, natsError(r.natsURL, err)
	}
	opts.Engine = e
	return func() {
		e.Close()
		nc.Close()
	}, nil
}
