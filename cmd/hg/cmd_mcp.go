package main

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

// mcpMaxMessage bounds one message a client sends hg mcp: the largest
// call is a submit's answers, at most 64 KiB.
const mcpMaxMessage = 1 << 20

func newMCPCmd(g *globals) *cobra.Command {
	var (
		root, adapterSpec, model string
		jobs                     int
		maxInline                int64
		maxRuns                  int
		learn                    []string
	)
	cmd := &cobra.Command{
		Use:   "mcp [--root DIR] [--adapter SPEC] [-j N] [--max-inline BYTES] [--max-runs N] [--learn CLASS ...]",
		Short: "serve the Model Context Protocol on stdin and stdout: an agent drives hg, and still cannot write PASS",
		Long: `Serve the Model Context Protocol over stdin and stdout, for an agent (an MCP
client) to drive hg with these tools, and no others:

  put       store a file or tree from under --root; returns its CID
  get       a file's content inline (at most --max-inline bytes), or a tree's
            entries; by CID, pin or RUN/NODE; writes no file
  plan      validate a Work Order file and list its waves and decisions
  submit    run a Work Order with answers to its decisions, as hg run does,
            in the background; returns the run id at once
  status    a run's node states, waiting up to 30 s for a change
  report    hg report of a run or receipt
  verify    hg verify of a run, a receipt or a bundle, against the keys the
            store trusts
  belief    the belief log of a task class

No tool sets a status, signs, trusts a key, approves, writes a pin, a ref
or a belief event, edits a record, or writes a file: what a submitted run
records, the scheduler records, accepting a node only on a receipt it
verified, under the same deny-by-default permissions and confinement as hg
run. Slots are answered by --adapter, never by the client. A client's
answers to decisions bind its run only: a run that reaches its outcome
writes them into its class's belief log (as hg run --answers does) only
for a class named by --learn CLASS (repeatable), never by default.

Files are read only under --root (default: the working directory, which
may not be /), after
every symlink is resolved; no path may lead into a store. The Work Order's
Haygent packages and workspace directories must lie there too. Runs execute
in this process, at most --max-runs at once, and are cancelled when it
stops ('hg resume RUN' goes on).
Diagnostics go to stderr; stdout carries the protocol.

An MCP client's configuration:

  {"command": "hg", "args": ["mcp", "--store", "/path/to/.haygent", "--root", "/path/to/project"]}`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkJobs(jobs); err != nil {
				return err
			}
			dir, err := locateStore(g.store)
			if err != nil {
				return err
			}
			if !isStoreDir(dir) {
				return hinted{errNoStore, "run 'hg init' first, or pass --store DIR"}
			}
			if root == "" {
				// A client started from / (as some start their servers)
				// would be given every file of the machine's.
				if wd, err := os.Getwd(); err != nil || filepath.Dir(wd) == wd {
					return usageError{errors.New("the working directory is the file system's root: give --root DIR, the directory a client may read files under")}
				}
				root = "."
			}
			srv, stop, err := newMCPServer(cmd.Context(), mcpOptions{StoreDir: dir, Root: root, AdapterSpec: adapterSpec,
				Model: model, Jobs: jobs, MaxInline: maxInline, MaxRuns: maxRuns, Learn: learn})
			if err != nil {
				return err
			}
			defer stop()
			err = srv.Run(cmd.Context(), &mcp.StdioTransport{MaxLineLength: mcpMaxMessage})
			if cmd.Context().Err() != nil {
				return nil // stopped by a signal
			}
			return err
		},
	}
	cmd.Flags().StringVar(&root, "root", "", "read files only under `DIR` (default: the working directory)")
	cmd.Flags().StringVar(&adapterSpec, "adapter", "", "who answers slots in submitted runs: script:FILE, exec:CMD or openai")
	cmd.Flags().StringVar(&model, "model", "", "the model, for --adapter openai")
	cmd.Flags().IntVarP(&jobs, "jobs", "j", 2, "run at most `N` nodes of a run at once")
	cmd.Flags().Int64Var(&maxInline, "max-inline", mcpDefaultInline, "the largest file get returns, in `BYTES`")
	cmd.Flags().IntVar(&maxRuns, "max-runs", mcpDefaultMaxRuns, "execute at most `N` submitted runs at once")
	cmd.Flags().StringArrayVar(&learn, "learn", nil, "let runs teach the belief log of `CLASS` a client's answers (repeatable; default: no class)")
	return cmd
}
