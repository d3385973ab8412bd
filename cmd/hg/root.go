package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/haygent/hg/cas"
	"github.com/ipfs/go-cid"
	"github.com/spf13/cobra"
)

// globals are the flags every command takes.
type globals struct {
	store string
	args  []string // the command line, for the store's holder file
	ui    *ui
	// learnClient are the classes whose belief logs a run that reaches
	// its outcome may teach answers an MCP client gave (hg mcp --learn);
	// for every other class, and every other command, none.
	learnClient map[string]bool
}

// Main runs hg with os.Args and returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{args: args, ui: &ui{stdin: stdin, stdout: stdout, stderr: stderr}}
	root := newRootCmd(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") {
		err = usageError{err}
	}
	if err != nil {
		g.ui.errorf("%v", err)
		if h := hintFor(err); h != "" {
			g.ui.hintf("%s", h)
		} else if errors.As(err, new(usageError)) {
			g.ui.hintf("see 'hg help' or 'hg COMMAND --help'")
		}
	}
	return exitCode(err)
}

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "hg",
		Short: "evidence-gated agent work on a content-addressed store",
		Long: `hg stores files, trees and typed objects as canonical DAG-CBOR blocks named
by their CIDs, in a store directory (.haygent/) found from --store, $HG_STORE,
or the nearest .haygent/ above the working directory.

Exit codes: 0 success, 1 error, 2 usage, 3 HALT, 4 integrity, 5 needs input.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       version(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.PersistentFlags().StringVar(&g.store, "store", "", "the store directory (default: $HG_STORE, else the nearest .haygent/)")
	root.PersistentFlags().BoolVar(&g.ui.forceProgress, "progress", false, "show progress on stderr even when it is not a terminal (it is shown on a terminal anyway)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	runCmd := newRunCmd(g)
	runCmd.AddCommand(newRunRmCmd(g))
	root.AddCommand(
		newVersionCmd(g),
		newInitCmd(g),
		newPutCmd(g),
		newGetCmd(g),
		newStatCmd(g),
		newDagCmd(g),
		newBlockCmd(g),
		newPinCmd(g),
		newGCCmd(g),
		newFsckCmd(g),
		newBundleCmd(g),
		newHaygentCmd(g),
		newReportCmd(g),
		newVerifyCmd(g),
		newAttestCmd(g),
		newReplayCmd(g),
		newApproveCmd(g),
		newKeyCmd(g),
		runCmd,
		newRunsCmd(g),
		newLogsCmd(g),
		newBeliefCmd(g),
		newResumeCmd(g),
		newStatusCmd(g),
		newCancelCmd(g),
		newBreakerCmd(g),
		newRecheckCmd(g),
		newMetricsCmd(g),
		newWithdrawCmd(g),
		newSupersedeCmd(g),
		newWorkerCmd(g),
		newMCPCmd(g),
		newServeCmd(g),
	)
	return root
}

// exactArgs is cobra.ExactArgs with a usage error and a clearer message.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Errorf("%s: want %s, got %d argument(s)", cmd.CommandPath(), names, len(args))}
		}
		return nil
	}
}

func rangeArgs(lo, hi int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageError{fmt.Errorf("%s: want %s, got %d argument(s)", cmd.CommandPath(), names, len(args))}
		}
		return nil
	}
}

// groupCmd is a command that only holds subcommands.
func groupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())}
			}
			return usageError{fmt.Errorf("%s needs a subcommand (see '%s --help')", cmd.CommandPath(), cmd.CommandPath())}
		},
	}
	c.AddCommand(subs...)
	return c
}

// resolve turns an argument into a CID: a CID string, or the name of a
// pin. An argument that is neither is a usage error.
func resolve(ctx context.Context, st cas.Store, arg string) (cid.Cid, error) {
	c, err := cas.ParseCID(arg)
	if err == nil {
		return c, nil
	}
	if cas.CheckPinName(arg) == nil {
		c, err := st.Pin(ctx, arg)
		if err == nil || !errors.Is(err, cas.ErrNotFound) {
			return c, err
		}
	}
	return cid.Undef, usageError{fmt.Errorf("%q is neither a CID nor a pin name: %w", arg, cas.ErrBadCID)}
}

// closeStore closes st and keeps the first error.
func closeStore(st cas.Store, err *error) {
	if cerr := st.Close(); cerr != nil && *err == nil {
		*err = cerr
	}
}
