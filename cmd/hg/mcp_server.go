package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/haygent/hg/dag"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP server of hg mcp: an agent drives hg through these tools and
// nothing else. The tool set is the security boundary. A tool may store
// content (put), read the store (get, status, report, belief), check
// (plan, verify) and run a Work Order as hg run does (submit); none can
// set a node's state or a run's status, sign, trust a key, write a pin,
// a ref or a belief event, approve, or write a file: the only records
// that change are those the scheduler itself writes for a submitted run,
// under the same permissions, acceptance and verification as hg run. A
// client's answers bind its run only: they are learned into the belief
// log of a class only when the operator named it (hg mcp --learn). mcpToolNames is the whole list; the tests hold the server to
// it.
var mcpToolNames = []string{"belief", "get", "plan", "put", "report", "status", "submit", "verify"}

// mcpServer is what the tools share: the store and root hg mcp was
// started with, and the runs it executes.
type mcpServer struct {
	storeDir    string   // the store, located once at start
	root        *mcpRoot // what a client may name files under
	adapterSpec string   // who answers slots in submitted runs (hg mcp --adapter), never a client
	model       string
	jobs        int
	maxInline   int64           // the largest file get returns
	learn       map[string]bool // the classes whose belief logs a client's answers may be written to (hg mcp --learn)
	runs        *mcpRuns
}

// mcpOptions configure newMCPServer; see the flags of hg mcp.
type mcpOptions struct {
	StoreDir    string
	Root        string
	AdapterSpec string
	Model       string
	Jobs        int
	MaxInline   int64
	MaxRuns     int
	Learn       []string // classes a run that reaches its outcome may teach the client's answers
}

// newMCPServer returns the MCP server of a store, and a function that
// cancels the runs it started and waits for them to stop. ctx bounds
// the runs submitted through it.
func newMCPServer(ctx context.Context, o mcpOptions) (*mcp.Server, func(), error) {
	root, err := newMCPRoot(o.Root, o.StoreDir)
	if err != nil {
		return nil, nil, err
	}
	if _, err := newAdapter(o.AdapterSpec, o.Model); err != nil {
		return nil, nil, err
	}
	if o.Jobs < 1 {
		o.Jobs = 1
	}
	if o.MaxInline <= 0 {
		o.MaxInline = mcpDefaultInline
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = mcpDefaultMaxRuns
	}
	learn := map[string]bool{}
	for _, class := range o.Learn {
		if err := dag.CheckClass(class); err != nil {
			return nil, nil, usageError{fmt.Errorf("--learn %q: %w", class, err)}
		}
		learn[class] = true
	}
	s := &mcpServer{storeDir: o.StoreDir, root: root, adapterSpec: o.AdapterSpec, model: o.Model,
		jobs: o.Jobs, maxInline: o.MaxInline, learn: learn, runs: newMCPRuns(ctx, o.MaxRuns)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "hg", Title: "hg: evidence-gated agent work", Version: version()},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	s.register(srv)
	return srv, s.runs.stop, nil
}

const mcpInstructions = `hg runs Work Orders of Haygents on a content-addressed store. A node is
done only when its receipt was verified by hg's scheduler; no tool here can
mark anything done, sign, or trust a key. Typical use: plan (see the
decisions to answer), submit with answers (returns a run id at once),
status with wait_seconds until the run is no longer running, report, then
verify. put stores a file or tree from under the server's root; get reads
a file or lists a tree back.`

func (s *mcpServer) register(srv *mcp.Server) {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}
	mcp.AddTool(srv, &mcp.Tool{Name: "put", Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: new(false), OpenWorldHint: new(false)},
		Description: "Store a file or a directory tree (recursively) from under the server's root; returns its CID. " +
			"Paths are relative to the root (or absolute inside it); none may lead out of it, by .. or a symlink, or into a store. " +
			"Nothing is pinned: name the tree in a Work Order as {\"tree\": CID}."},
		guard(s.put))
	mcp.AddTool(srv, &mcp.Tool{Name: "get", Annotations: ro,
		Description: "Read a file back (inline: text, or base64 when not UTF-8; at most the server's inline limit), or list a tree. " +
			"ref is a CID, a pin name, or RUN/NODE (the final workspace of a node of a run, refused unless hg's verification of the run holds); " +
			"path walks into a tree. Writes no file."},
		guard(s.get))
	mcp.AddTool(srv, &mcp.Tool{Name: "plan", Annotations: ro,
		Description: "Validate a Work Order file (under the root) and return its waves and its decisions: which the belief log binds, " +
			"which must be answered in submit (with their allowed values). Runs nothing."},
		guard(s.plan))
	mcp.AddTool(srv, &mcp.Tool{Name: "submit", Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)},
		Description: "Run a Work Order file (under the root) as 'hg run' does, with answers to its open decisions; returns the run id " +
			"as soon as the run has started, and runs it in the background. Answers must name decisions of the Work Order and take " +
			"allowed values; an answer the belief log binds otherwise is refused. Nodes count as done only on receipts hg verified."},
		guard(s.submit))
	mcp.AddTool(srv, &mcp.Tool{Name: "status", Annotations: ro,
		Description: "A run's status and every node's state, attempts and receipt, as its record says. With wait_seconds (at most 30), " +
			"wait until something changes or the run stops running. Once the run stopped, verified says whether hg's verification of " +
			"it holds now (and unverified what failed): believe the states only when verified is true."},
		guard(s.status))
	mcp.AddTool(srv, &mcp.Tool{Name: "report", Annotations: ro,
		Description: "The report of a run or a receipt, as 'hg report' prints it, from the ledger only (text escaped as for a terminal). " +
			"A receipt's status line says NOT VERIFIED when it does not verify."},
		guard(s.report))
	mcp.AddTool(srv, &mcp.Tool{Name: "verify", Annotations: ro,
		Description: "Verify a run or a receipt offline, as 'hg verify --json' does, against the keys the store trusts (never keys " +
			"a client gives); or a bundle file (under the root), read into memory only. ok is true only when every check held."},
		guard(s.verify))
	mcp.AddTool(srv, &mcp.Tool{Name: "belief", Annotations: ro,
		Description: "The belief log of a task class: the decisions it binds now, and every event, oldest first. Read only."},
		guard(s.belief))
}

// guard turns a panic in a tool into the tool's error, so that no input
// brings the server down; the stack goes to the error text's end.
func guard[In, Out any](h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (res *mcp.CallToolResult, out Out, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("internal error (a bug in hg): %v\n%s", p, debug.Stack())
			}
		}()
		return h(ctx, req, in)
	}
}

// globals returns the globals of one tool call: the server's store, and
// a ui whose stdout and stderr are out and errw (stdin is empty: nothing
// is ever asked on a terminal). Never the process's stdout, which
// carries the protocol.
func (s *mcpServer) globals(out, errw io.Writer) *globals {
	return &globals{store: s.storeDir, args: []string{"mcp"}, ui: &ui{stdin: strings.NewReader(""), stdout: out, stderr: errw},
		learnClient: s.learn}
}

// cli runs one hg command in this process against the server's store,
// as the command line would, with args the server built (a client's
// values only after "--", each checked for its form first). It returns
// what the command wrote to stdout and its error: nil for exit 0, else
// the command's error lines.
func (s *mcpServer) cli(ctx context.Context, args ...string) ([]byte, error) {
	var out, errb bytes.Buffer
	code := run(ctx, append([]string{"--store", s.storeDir}, args...), strings.NewReader(""), &out, &errb)
	if code == exitOK {
		return out.Bytes(), nil
	}
	return out.Bytes(), &cliError{code: code, text: strings.TrimSpace(errb.String())}
}

// cliError is a command's failure as a tool reports it: its error and
// hint lines, and its exit code.
type cliError struct {
	code int
	text string
}

func (e *cliError) Error() string { return fmt.Sprintf("%s (exit %d)", e.text, e.code) }
