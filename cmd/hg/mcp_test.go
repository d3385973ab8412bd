package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpFixture is a project directory an MCP server is started in: the
// store at ROOT/.haygent, the echo and claimer Haygents under
// ROOT/haygents, the release Work Order under ROOT/workorders.
type mcpFixture struct {
	root, store string
}

func newMCPFixture(t testing.TB) *mcpFixture {
	t.Helper()
	root := t.TempDir()
	f := &mcpFixture{root: root, store: filepath.Join(root, storeDirName)}
	if err := boltstore.Init(f.store); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"haygents", "workorders"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range []string{"echo", "claimer"} {
		if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/"+h, filepath.Join(root, "haygents", h)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
	}
	data, err := os.ReadFile("../../fixtures/workorders/release.json")
	if err != nil {
		t.Fatal(err)
	}
	f.write(t, "workorders/release.json", string(data))
	return f
}

func (f *mcpFixture) write(t testing.TB, rel, content string) string {
	t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// connect starts an MCP server on the fixture with opts and connects the
// SDK's own client to it over in-memory transports.
func (f *mcpFixture) connect(t testing.TB, opts mcpOptions) *mcp.ClientSession {
	t.Helper()
	cs, _ := f.connectStop(t, opts)
	return cs
}

// connectStop is connect, and returns a function that stops the server
// as hg mcp stops when its client goes: its runs cancelled.
func (f *mcpFixture) connectStop(t testing.TB, opts mcpOptions) (*mcp.ClientSession, func()) {
	t.Helper()
	ctx := context.Background()
	opts.StoreDir, opts.Root = f.store, f.root
	srv, stop, err := newMCPServer(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hg-test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			cs.Close()
			ss.Wait()
			stop()
		})
	}
	t.Cleanup(end)
	return cs, end
}

// call calls a tool and decodes its structured result into out; it
// fails the test on an error of any kind.
func call(t testing.TB, cs *mcp.ClientSession, name string, args, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", name, args, resultText(res))
	}
	data, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("%s: %v in %s", name, err, data)
	}
}

// refused calls a tool that must fail and returns the error's text: a
// protocol error or a tool error, never a result.
func refused(t *testing.T, cs *mcp.ClientSession, name string, args any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error()
	}
	if !res.IsError {
		t.Fatalf("%s %.200v: want an error, got %s", name, args, resultText(res))
	}
	return resultText(res)
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPToolSet holds the server to its exact list of tools: a tool
// added is a new way in, and must be added here on purpose.
func TestMCPToolSet(t *testing.T) {
	f := newMCPFixture(t)
	cs := f.connect(t, mcpOptions{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	inputs := map[string][]string{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		data, _ := json.Marshal(tool.InputSchema)
		var schema struct {
			Properties           map[string]any `json:"properties"`
			AdditionalProperties any            `json:"additionalProperties"`
		}
		if err := json.Unmarshal(data, &schema); err != nil {
			t.Fatal(err)
		}
		// No argument the schema does not name reaches a tool.
		if schema.AdditionalProperties != false {
			t.Errorf("tool %s: additionalProperties %v, want false", tool.Name, schema.AdditionalProperties)
		}
		for p := range schema.Properties {
			inputs[tool.Name] = append(inputs[tool.Name], p)
		}
		slices.Sort(inputs[tool.Name])
	}
	slices.Sort(names)
	want := []string{"belief", "get", "plan", "put", "report", "status", "submit", "verify"}
	if !slices.Equal(names, want) || !slices.Equal(mcpToolNames, want) {
		t.Fatalf("tools %v (declared %v), want exactly %v", names, mcpToolNames, want)
	}
	// Every argument of every tool: none names a status, a key, a
	// signature, an adapter, an output path, a pin or a run id to
	// choose.
	wantInputs := map[string][]string{
		"belief": {"class"},
		"get":    {"path", "ref"},
		"plan":   {"workorder"},
		"put":    {"path"},
		"report": {"ref"},
		"status": {"run", "wait_seconds"},
		"submit": {"answers", "workorder"},
		"verify": {"bundle", "ref"},
	}
	if !reflect.DeepEqual(inputs, wantInputs) {
		t.Fatalf("tool arguments %v, want %v", inputs, wantInputs)
	}
}

// TestMCPDrivesWorkOrderToDone drives the release Work Order, whose
// three critical decisions must be answered, to done with the SDK's own
// client: plan, submit, status until done, report, verify, belief; and a
// file put and got back.
func TestMCPDrivesWorkOrderToDone(t *testing.T) {
	f := newMCPFixture(t)
	cs := f.connect(t, mcpOptions{Learn: []string{"release"}})

	var plan planOut
	call(t, cs, "plan", map[string]any{"workorder": "workorders/release.json"}, &plan)
	if plan.Class != "release" || !reflect.DeepEqual(plan.Waves, [][]string{{"build"}, {"publish"}}) {
		t.Fatalf("plan: %+v", plan)
	}
	if want := []string{"channel", "platform", "retention"}; !slices.Equal(plan.Open, want) {
		t.Fatalf("open decisions %v, want %v", plan.Open, want)
	}
	for _, d := range plan.Decisions {
		if d.Name == "retention" && d.Schema == nil {
			t.Errorf("decision retention: no schema in the plan")
		}
	}

	// Without answers nothing runs, and the questions come back.
	if msg := refused(t, cs, "submit", map[string]any{"workorder": "workorders/release.json"}); !strings.Contains(msg, "3 decisions unanswered") || !strings.Contains(msg, "Which platform") {
		t.Fatalf("submit without answers: %s", msg)
	}
	var sub submitOut
	call(t, cs, "submit", map[string]any{"workorder": "workorders/release.json",
		"answers": map[string]any{"platform": "linux", "channel": "beta", "retention": 30}}, &sub)
	if !strings.HasPrefix(sub.Run, "run-") || len(sub.Decisions) != 4 {
		t.Fatalf("submit: %+v", sub)
	}
	st := waitRun(t, cs, sub.Run)
	if st.Status != "done" || st.Error != "" {
		t.Fatalf("run %s: %+v", sub.Run, st)
	}
	for _, n := range st.Nodes {
		if n.State != "done" || n.Receipt == "" {
			t.Fatalf("node %+v: want done with a receipt", n)
		}
	}

	var rep reportOut
	call(t, cs, "report", map[string]any{"ref": sub.Run}, &rep)
	if !strings.Contains(rep.Report, "status     done") || !strings.Contains(rep.Report, "retention = 30  (asked, answered by an MCP client)") {
		t.Fatalf("report:\n%s", rep.Report)
	}
	var receipt reportOut
	call(t, cs, "report", map[string]any{"ref": st.Nodes[0].Receipt}, &receipt)
	if !strings.Contains(receipt.Report, "PASS") || strings.Contains(receipt.Report, "NOT VERIFIED") || receipt.Error != "" {
		t.Fatalf("receipt report:\n%s\n%s", receipt.Report, receipt.Error)
	}

	var v verifyReport
	call(t, cs, "verify", map[string]any{"ref": sub.Run}, &v)
	if !v.OK || v.FirstFailure != nil || len(v.Runs) != 1 || v.Runs[0].Status != "done" || len(v.Runs[0].Nodes) != 2 {
		t.Fatalf("verify: %+v", v)
	}

	// The answers were learned for the class (hg mcp --learn release):
	// a second order asks none.
	var b beliefOut
	call(t, cs, "belief", map[string]any{"class": "release"}, &b)
	if len(b.Bound) != 3 || !strings.Contains(b.Bound[0].Cause, "(answered by an MCP client)") {
		t.Fatalf("belief: %+v", b)
	}
	call(t, cs, "plan", map[string]any{"workorder": "workorders/release.json"}, &plan)
	if len(plan.Open) != 0 {
		t.Fatalf("second plan: open %v", plan.Open)
	}

	// A bundle of the run, verified from the file alone against the
	// keys the store trusts.
	bundle := filepath.Join(f.root, "run.car")
	if out, err := exec.Command(hgBinary(t), "--store", f.store, "bundle", "export", sub.Run, "-o", bundle).CombinedOutput(); err != nil {
		t.Fatalf("bundle export: %v: %s", err, out)
	}
	v = verifyReport{}
	call(t, cs, "verify", map[string]any{"bundle": "run.car"}, &v)
	if !v.OK || len(v.Runs) != 1 {
		t.Fatalf("verify bundle: %+v", v)
	}

	// An answer other than the one the belief log now binds is refused:
	// the log changes through a person (hg belief), not a client.
	if msg := refused(t, cs, "submit", map[string]any{"workorder": "workorders/release.json",
		"answers": map[string]any{"channel": "stable"}}); !strings.Contains(msg, "channel") || !strings.Contains(msg, "belief") {
		t.Fatalf("an answer against the belief log: %s", msg)
	}

	// A file in and out; a tree listed, and a file of it read by path.
	f.write(t, "notes/a.txt", "hello\n")
	f.write(t, "notes/b.bin", "\xff\xfe")
	var put putOut
	call(t, cs, "put", map[string]any{"path": "notes/a.txt"}, &put)
	var got getOut
	call(t, cs, "get", map[string]any{"ref": put.CID}, &got)
	if got.Kind != "file" || got.Text == nil || *got.Text != "hello\n" {
		t.Fatalf("get: %+v", got)
	}
	call(t, cs, "put", map[string]any{"path": "notes"}, &put)
	got = getOut{}
	call(t, cs, "get", map[string]any{"ref": put.CID}, &got)
	if got.Kind != "dir" || len(got.Entries) != 2 {
		t.Fatalf("get tree: %+v", got)
	}
	got = getOut{}
	call(t, cs, "get", map[string]any{"ref": put.CID, "path": "b.bin"}, &got)
	if got.Text != nil || got.Base64 != base64.StdEncoding.EncodeToString([]byte("\xff\xfe")) {
		t.Fatalf("get b.bin: %+v", got)
	}
	got = getOut{}
	call(t, cs, "get", map[string]any{"ref": sub.Run + "/publish"}, &got)
	if got.Kind != "dir" {
		t.Fatalf("get RUN/NODE: %+v", got)
	}

	// Calls at once (an agent's client may send them so): each answers
	// as alone (run under -race, the in-process commands share nothing).
	var wg sync.WaitGroup
	errs := make(chan string, 32)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				name string
				args map[string]any
			)
			switch i % 4 {
			case 0:
				name, args = "status", map[string]any{"run": sub.Run}
			case 1:
				name, args = "report", map[string]any{"ref": sub.Run}
			case 2:
				name, args = "verify", map[string]any{"ref": sub.Run}
			case 3:
				name, args = "get", map[string]any{"ref": put.CID, "path": "a.txt"}
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
			switch {
			case err != nil:
				errs <- name + ": " + err.Error()
			case res.IsError:
				errs <- name + ": " + resultText(res)
			case !strings.Contains(resultText(res), map[int]string{0: `"status":"done"`, 1: "status     done", 2: `"ok":true`, 3: `"text":"hello\n"`}[i%4]):
				errs <- name + ": " + truncate(resultText(res))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// waitRun calls status with wait_seconds until the run stops running.
func waitRun(t testing.TB, cs *mcp.ClientSession, run string) statusOut {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute) // a loaded machine under -race
	for {
		var st statusOut
		call(t, cs, "status", map[string]any{"run": run, "wait_seconds": 5}, &st)
		if st.Status != "running" || time.Now().After(deadline) {
			return st
		}
	}
}

// storeState is what a client must not be able to change but through a
// run the scheduler records: every pin, every ref of every namespace,
// the trust list, the runner key.
func storeState(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var b strings.Builder
	pins, err := st.Pins(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pins {
		b.WriteString("pin " + p.Name + " " + p.CID.String() + "\n")
	}
	nss, err := st.RefNamespaces(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range nss {
		refs, err := st.Refs(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range refs {
			b.WriteString("ref " + ns + "/" + r.Name + " " + r.CID.String() + "\n")
		}
	}
	for _, k := range []string{trustFile(dir), keyPath(dir)} {
		data, _ := os.ReadFile(k)
		b.WriteString(k + " " + base64.StdEncoding.EncodeToString(data) + "\n")
	}
	return b.String()
}

// TestMCPWritePathsRefused is the adversarial suite: every way a client
// might write what it must not, or read what it must not, is refused
// with an error (never a panic, never a half-written store), and the
// store's pins, refs, trust list and key are as they were.
func TestMCPWritePathsRefused(t *testing.T) {
	f := newMCPFixture(t)
	cs := f.connect(t, mcpOptions{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	if err := os.WriteFile(secret, []byte("not for agents"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.root, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(f.root, "secret-link")); err != nil {
		t.Fatal(err)
	}
	// The runner key exists: a run (or hg key gen) made it.
	if out, err := exec.Command(hgBinary(t), "--store", f.store, "key", "gen").CombinedOutput(); err != nil {
		t.Fatalf("key gen: %v: %s", err, out)
	}
	// A Work Order per way out through a run.
	f.write(t, "workorders/ws-outside.json", `{"workorder": "ws", "objective": "read outside the root",
		"nodes": {"n": {"haygent": "../haygents/echo", "workspace": "`+outside+`", "input": {"value": 1, "trail": []}}}}`)
	f.write(t, "workorders/ws-symlink.json", `{"workorder": "ws", "objective": "read outside the root by a symlink",
		"nodes": {"n": {"haygent": "../haygents/echo", "workspace": "../escape", "input": {"value": 1, "trail": []}}}}`)
	f.write(t, "workorders/ws-store.json", `{"workorder": "ws", "objective": "read the store's keys",
		"nodes": {"n": {"haygent": "../haygents/echo", "workspace": "../.haygent/keys", "input": {"value": 1, "trail": []}}}}`)
	if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/echo", filepath.Join(outside, "echo")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	f.write(t, "workorders/pkg-outside.json", `{"workorder": "pkg", "objective": "a package outside the root",
		"nodes": {"n": {"haygent": "`+filepath.Join(outside, "echo")+`", "input": {"value": 1, "trail": []}}}}`)
	if err := os.WriteFile(filepath.Join(outside, "wo.json"), []byte(`{"workorder": "x", "objective": "x", "nodes": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}

	before := storeState(t, f.store)
	answers := map[string]any{"platform": "linux", "channel": "beta", "retention": 30}
	huge := strings.Repeat("a", 2<<20)
	cases := []struct {
		name, tool string
		args       any
		want       string // in the error
	}{
		// No tool but these eight: none sets a status, signs, trusts,
		// approves, pins, writes a ref or a belief event.
		{"set a status", "set_status", map[string]any{"run": "run-x", "node": "n", "state": "done"}, "unknown tool"},
		{"sign", "sign", map[string]any{"receipt": "bafy"}, "unknown tool"},
		{"trust a key", "key_trust", map[string]any{"key": "ed25519:AAAA"}, "unknown tool"},
		{"approve", "approve", map[string]any{"value": 1}, "unknown tool"},
		{"pin", "pin_add", map[string]any{"name": "x", "cid": "bafy"}, "unknown tool"},
		{"belief assert", "belief_assert", map[string]any{"class": "release", "slot": "channel", "value": "stable"}, "unknown tool"},
		{"run a command", "exec", map[string]any{"argv": []string{"sh"}}, "unknown tool"},
		// Arguments a tool does not take are refused, not ignored.
		{"status with a state", "status", map[string]any{"run": "run-x", "state": "done"}, "unexpected additional properties"},
		{"submit with an adapter", "submit", map[string]any{"workorder": "workorders/release.json", "answers": answers, "adapter": "exec:sh"}, "additional"},
		{"submit with a run id", "submit", map[string]any{"workorder": "workorders/release.json", "answers": answers, "run_id": "run-done"}, "additional"},
		{"verify with a key", "verify", map[string]any{"ref": "run-x", "key": "ed25519:AAAA"}, "additional"},
		{"get to a file", "get", map[string]any{"ref": "x", "output": "/tmp/x"}, "additional"},
		{"put with a pin", "put", map[string]any{"path": "workorders", "pin": "x"}, "additional"},
		// Malformed and huge arguments.
		{"path of the wrong type", "put", map[string]any{"path": 5}, "path"},
		{"no arguments", "put", nil, "path"},
		{"huge path", "put", map[string]any{"path": huge}, "at most"},
		{"huge ref", "get", map[string]any{"ref": huge}, "at most"},
		{"huge answers", "submit", map[string]any{"workorder": "workorders/release.json", "answers": map[string]any{"platform": huge}}, "at most"},
		{"wait too long", "status", map[string]any{"run": "run-x", "wait_seconds": 3600}, "wait_seconds"},
		// Reading outside the root, or the store.
		{"put ..", "put", map[string]any{"path": "../" + filepath.Base(outside)}, "outside"},
		{"put absolute", "put", map[string]any{"path": secret}, "outside"},
		{"put /etc", "put", map[string]any{"path": "/etc/hostname"}, ""},
		{"put a symlinked dir", "put", map[string]any{"path": "escape"}, "outside"},
		{"put through a symlinked dir", "put", map[string]any{"path": "escape/secret.txt"}, "outside"},
		{"put a symlink", "put", map[string]any{"path": "secret-link"}, "outside"},
		{"put the runner key", "put", map[string]any{"path": ".haygent/keys/runner.key"}, "inside a store"},
		{"put the store", "put", map[string]any{"path": ".haygent"}, "inside a store"},
		{"put another store's key", "put", map[string]any{"path": "sub/.HAYGENT/keys/runner.key"}, ""},
		{"plan outside", "plan", map[string]any{"workorder": filepath.Join(outside, "wo.json")}, "outside"},
		{"verify a bundle outside", "verify", map[string]any{"bundle": secret}, "outside"},
		{"get ..", "get", map[string]any{"ref": "../../etc/passwd"}, "want a CID"},
		{"get a path with ..", "get", map[string]any{"ref": "bafkqaaa", "path": "a/../../b"}, "path"},
		// A Work Order is a way to read files too: its workspaces and
		// packages must lie under the root.
		{"workspace outside", "submit", map[string]any{"workorder": "workorders/ws-outside.json"}, "outside"},
		{"workspace through a symlink", "submit", map[string]any{"workorder": "workorders/ws-symlink.json"}, "outside"},
		{"workspace in the store", "submit", map[string]any{"workorder": "workorders/ws-store.json"}, "inside a store"},
		{"package outside", "submit", map[string]any{"workorder": "workorders/pkg-outside.json"}, "outside"},
		{"plan a package outside", "plan", map[string]any{"workorder": "workorders/pkg-outside.json"}, "outside"},
		{"a package that holds the store", "plan", map[string]any{"workorder": "workorders/pkg-root.json"}, "holds the store"},
		// Answers that do not match the Work Order's decision slots.
		{"answer an unknown decision", "submit", map[string]any{"workorder": "workorders/release.json",
			"answers": map[string]any{"platform": "linux", "channel": "beta", "retention": 30, "force": true}}, "force"},
		{"answer outside allowed", "submit", map[string]any{"workorder": "workorders/release.json",
			"answers": map[string]any{"platform": "windows", "channel": "beta", "retention": 30}}, "platform"},
		{"answer outside the schema", "submit", map[string]any{"workorder": "workorders/release.json",
			"answers": map[string]any{"platform": "linux", "channel": "beta", "retention": 9999}}, "retention"},
		{"answer a float for an integer", "submit", map[string]any{"workorder": "workorders/release.json",
			"answers": map[string]any{"platform": "linux", "channel": "beta", "retention": 30.5}}, "retention"},
		{"answers not all given", "submit", map[string]any{"workorder": "workorders/release.json",
			"answers": map[string]any{"platform": "linux"}}, "unanswered"},
		// Reads of what does not exist are errors, not panics.
		{"status of a run id that is not one", "status", map[string]any{"run": "../../x"}, "run id"},
		{"status of no run", "status", map[string]any{"run": "run-none"}, ""},
		{"report of nothing", "report", map[string]any{"ref": "run-none"}, ""},
		{"verify nothing", "verify", map[string]any{}, "give ref"},
		{"belief of a bad class", "belief", map[string]any{"class": "../x"}, ""},
	}
	f.write(t, "sub/.HAYGENT/keys/runner.key", "another store's key")
	f.write(t, "workorders/pkg-root.json", `{"workorder": "pkg", "objective": "store the store as a package",
		"nodes": {"n": {"haygent": "..", "input": {}}}}`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := refused(t, cs, c.tool, c.args)
			t.Logf("%s", truncate(msg))
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q, want it to say %q", truncate(msg), c.want)
			}
			if strings.Contains(msg, "internal error") {
				t.Fatalf("a panic: %s", msg)
			}
			// Where a symlink leads out is never said.
			if strings.Contains(c.name, "symlink") && strings.Contains(msg, outside) {
				t.Fatalf("the error names the directory outside: %s", msg)
			}
		})
	}
	// No error says whether a file outside the root exists: a missing
	// one and a present one are refused alike, before either is looked at.
	f.write(t, "workorders/pkg-missing.json", `{"workorder": "pkg", "objective": "probe outside the root",
		"nodes": {"n": {"haygent": "/nonexistent/echo", "input": {"value": 1, "trail": []}}}}`)
	for _, args := range []map[string]any{
		{"path": "/nonexistent/file"}, {"path": "/etc/hostname"}, {"path": "../../../nonexistent"},
	} {
		if msg := refused(t, cs, "put", args); !strings.Contains(msg, "outside") || strings.Contains(msg, "no such file") {
			t.Errorf("put %v: %s", args, msg)
		}
	}
	if msg := refused(t, cs, "plan", map[string]any{"workorder": "workorders/pkg-missing.json"}); !strings.Contains(msg, "outside") || strings.Contains(msg, "no such file") {
		t.Errorf("plan of a package outside: %s", msg)
	}
	// The server still answers after all of it.
	var plan planOut
	call(t, cs, "plan", map[string]any{"workorder": "workorders/release.json"}, &plan)
	if after := storeState(t, f.store); after != before {
		t.Fatalf("the store changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	// A tree put from the root holds no store.
	var put putOut
	call(t, cs, "put", map[string]any{"path": "."}, &put)
	var got getOut
	call(t, cs, "get", map[string]any{"ref": put.CID}, &got)
	for _, e := range got.Entries {
		if strings.EqualFold(e.Name, storeDirName) {
			t.Fatalf("put . stored the store: %+v", got.Entries)
		}
		if e.Name == "escape" && e.Kind != cas.KindSymlink {
			t.Fatalf("put . followed the symlink escape: %+v", e)
		}
	}
	var sub getOut
	call(t, cs, "get", map[string]any{"ref": put.CID, "path": "sub"}, &sub)
	if len(sub.Entries) != 0 {
		t.Fatalf("put . stored sub/.HAYGENT: %+v", sub.Entries)
	}
	// A symlink inside a stored tree is read as a link, never followed.
	var link getOut
	call(t, cs, "get", map[string]any{"ref": put.CID, "path": "secret-link"}, &link)
	if link.Kind != cas.KindSymlink || link.Target != secret || link.Text != nil {
		t.Fatalf("get of a symlink: %+v", link)
	}
}

// TestMCPClaimedPassDoesNotCount submits a Work Order whose Haygent's
// slot claims every test passed, with no test run: the run halts, the
// node is failed, the report and verify say so. The client cannot make
// the claim count.
func TestMCPClaimedPassDoesNotCount(t *testing.T) {
	f := newMCPFixture(t)
	script, err := filepath.Abs("../../fixtures/scripts/claimer.json")
	if err != nil {
		t.Fatal(err)
	}
	cs := f.connect(t, mcpOptions{AdapterSpec: "script:" + script})
	f.write(t, "workorders/claims.json", `{"workorder": "claims", "objective": "a node whose slot claims success",
		"nodes": {"claim": {"haygent": "../haygents/claimer", "input": {}}}, "outcome": {"require": ["claim"]}}`)
	var sub submitOut
	call(t, cs, "submit", map[string]any{"workorder": "workorders/claims.json"}, &sub)
	st := waitRun(t, cs, sub.Run)
	if st.Status != "halted" || len(st.Nodes) != 1 || st.Nodes[0].State != "failed" {
		t.Fatalf("run: %+v", st)
	}
	var rep reportOut
	call(t, cs, "report", map[string]any{"ref": sub.Run}, &rep)
	if !strings.Contains(rep.Report, "HALT") || strings.Contains(rep.Report, "status     done") {
		t.Fatalf("report:\n%s", rep.Report)
	}
	var v verifyReport
	call(t, cs, "verify", map[string]any{"ref": sub.Run}, &v)
	if len(v.Runs) != 1 || v.Runs[0].Status != "halted" {
		t.Fatalf("verify: %+v", v)
	}
	for _, n := range v.Runs[0].Nodes {
		if n.State == "done" || n.Status == "PASS" {
			t.Fatalf("verify shows the claimed node as %s/%s", n.State, n.Status)
		}
	}
	// A record forged to say done (which no tool can write) does not
	// verify: verify answers ok false, naming the check, not an error.
	forgeRun(t, f.store, sub.Run, "run-forged", func(root map[string]any) {
		root["status"], root["reason"] = "done", "all tests passed"
	})
	v = verifyReport{}
	call(t, cs, "verify", map[string]any{"ref": "run-forged"}, &v)
	if v.OK || v.FirstFailure == nil {
		t.Fatalf("verify of a forged record: %+v", v)
	}
	t.Logf("the forged record: %s: %s", v.FirstFailure.Check, v.FirstFailure.Detail)
	// status shows the record as stored, and says it does not verify.
	var fst statusOut
	call(t, cs, "status", map[string]any{"run": "run-forged"}, &fst)
	if fst.Status != "done" || fst.Verified == nil || *fst.Verified || !strings.Contains(fst.Unverified, v.FirstFailure.Check) {
		t.Fatalf("status of the forged record: %+v", fst)
	}
	if st.Verified == nil || !*st.Verified {
		t.Fatalf("status of the honest halted run: verified %v (%s), want true", st.Verified, st.Unverified)
	}
	// get RUN/NODE of a record forged to say the node is done (its
	// receipt a HALT) hands out no workspace: the run does not verify.
	page := forgePage(t, f.store, sub.Run, func(n map[string]any) { n["state"] = "done" })
	forgeRun(t, f.store, sub.Run, "run-forged-node", func(root map[string]any) {
		root["status"], root["reason"] = "done", "all tests passed"
		root["pages"] = []any{page}
	})
	if msg := refused(t, cs, "get", map[string]any{"ref": "run-forged-node/claim"}); !strings.Contains(msg, "does not verify") {
		t.Fatalf("get of a forged done node's workspace: %s", msg)
	}
	// The honest run's failed node: its workspace, noted as not accepted.
	var got getOut
	call(t, cs, "get", map[string]any{"ref": sub.Run + "/claim"}, &got)
	if got.Kind != "dir" || !strings.Contains(got.Note, "not accepted work") {
		t.Fatalf("get of the failed node's workspace: %+v", got)
	}
}

// TestMCPStdioBinary runs the real hg mcp over stdio with the SDK's
// CommandTransport: nothing but the protocol on stdout.
func TestMCPStdioBinary(t *testing.T) {
	f := newMCPFixture(t)
	cmd := exec.Command(hgBinary(t), "--store", f.store, "mcp", "--root", f.root)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "hg-test", Version: "0"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(mcpToolNames) {
		t.Fatalf("%d tools, want %d", len(res.Tools), len(mcpToolNames))
	}
	var plan planOut
	call(t, cs, "plan", map[string]any{"workorder": filepath.Join(f.root, "workorders/release.json")}, &plan)
	if len(plan.Open) != 3 {
		t.Fatalf("plan: %+v", plan)
	}
	var sub submitOut
	call(t, cs, "submit", map[string]any{"workorder": "workorders/release.json",
		"answers": map[string]any{"platform": "darwin", "channel": "stable", "retention": 7}}, &sub)
	if st := waitRun(t, cs, sub.Run); st.Status != "done" {
		t.Fatalf("run: %+v", st)
	}
	refused(t, cs, "put", map[string]any{"path": "/etc/hostname"})
	// A message over the 1 MiB bound ends the session, not in a panic.
	_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "put", Arguments: map[string]any{"path": strings.Repeat("a", 2<<20)}})
	if err == nil {
		t.Fatal("a 2 MiB message: no error")
	}
	t.Logf("a 2 MiB message: %v", err)
	cs.Close()
	if strings.Contains(stderr.String(), "panic") {
		t.Fatalf("hg mcp panicked:\n%s", stderr.String())
	}
}

// TestMCPLongRun: submit returns while a long run goes on; a run past
// --max-runs is refused; status waits for a change; stopping the server
// cancels the run as ^C cancels hg run, and hg resume finishes it.
func TestMCPLongRun(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	f := newMCPFixture(t)
	if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/nap", filepath.Join(f.root, "haygents", "nap")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	data, err := os.ReadFile("../../fixtures/workorders/slow-chain.json")
	if err != nil {
		t.Fatal(err)
	}
	f.write(t, "workorders/slow-chain.json", string(data))
	cs, stop := f.connectStop(t, mcpOptions{MaxRuns: 1, Jobs: 1})
	var sub submitOut
	call(t, cs, "submit", map[string]any{"workorder": "workorders/slow-chain.json"}, &sub)
	if msg := refused(t, cs, "submit", map[string]any{"workorder": "workorders/release.json",
		"answers": map[string]any{"platform": "linux", "channel": "beta", "retention": 30}}); !strings.Contains(msg, "at most 1 at once") {
		t.Fatalf("a second run past --max-runs 1: %s", msg)
	}
	var before, after statusOut
	call(t, cs, "status", map[string]any{"run": sub.Run}, &before)
	if before.Status != "running" || before.Executing == nil || !*before.Executing {
		t.Fatalf("status right after submit: %+v", before)
	}
	call(t, cs, "status", map[string]any{"run": sub.Run, "wait_seconds": 30}, &after)
	if after.Status == before.Status && sameNodes(after.Nodes, before.Nodes) {
		t.Fatalf("status waited 30 s and nothing changed: %+v", after)
	}
	if after.Status != "running" {
		t.Fatalf("eight one-second nodes ended within a wait for a change: %+v", after)
	}
	stop()
	hg := hgBinary(t)
	st, err := status(t, hg, f.store, sub.Run)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status == "done" || st.Executing != nil && *st.Executing {
		t.Fatalf("after hg mcp stopped: %+v", st)
	}
	if out, err := exec.Command(hg, "--store", f.store, "resume", sub.Run).CombinedOutput(); err != nil {
		t.Fatalf("hg resume: %v: %s", err, out)
	}
	if st, err := status(t, hg, f.store, sub.Run); err != nil || st.Status != "done" {
		t.Fatalf("after hg resume: %+v, %v", st, err)
	}
}

// TestMCPSelfMadeApprovalRefused: a client that signs an approval with
// a key of its own and submits it in a Work Order's input gets a HALT:
// only the package's approvers approve, and no tool reaches their keys.
// The same order approved by the package's approver is done: the key is
// the only difference.
func TestMCPSelfMadeApprovalRefused(t *testing.T) {
	f := newMCPFixture(t)
	if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/approver", filepath.Join(f.root, "haygents", "approver")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	cs := f.connect(t, mcpOptions{})
	hg := hgBinary(t)
	dir := t.TempDir()
	own := filepath.Join(dir, "agent.key")
	if _, err := ledger.GenerateKey(own); err != nil {
		t.Fatal(err)
	}
	approver, err := filepath.Abs("../../fixtures/keys/approver.key")
	if err != nil {
		t.Fatal(err)
	}
	submitApproved := func(name, key string) statusOut {
		t.Helper()
		value := filepath.Join(dir, name+"-value.json")
		input := filepath.Join(dir, name+"-input.json")
		if err := os.WriteFile(value, []byte(`"ship it"`), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(input, []byte(`{"value": "ship it"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(hg, "approve", "--value", value, "--key-file", key, "--into", input).CombinedOutput(); err != nil {
			t.Fatalf("hg approve: %v: %s", err, out)
		}
		signed, err := os.ReadFile(input)
		if err != nil {
			t.Fatal(err)
		}
		f.write(t, "workorders/"+name+".json", `{"workorder": "approve", "objective": "ship with an approval",
			"nodes": {"ship": {"haygent": "../haygents/approver", "input": `+string(signed)+`}}, "outcome": {"require": ["ship"]}}`)
		var sub submitOut
		call(t, cs, "submit", map[string]any{"workorder": "workorders/" + name + ".json"}, &sub)
		return waitRun(t, cs, sub.Run)
	}
	st := submitApproved("self", own)
	if st.Status != "halted" || st.Nodes[0].State != "failed" {
		t.Fatalf("a self-made approval: %+v", st)
	}
	var rep reportOut
	call(t, cs, "report", map[string]any{"ref": st.Nodes[0].Receipt}, &rep)
	if !strings.Contains(rep.Report, "APPROVED (FAIL)") {
		t.Fatalf("receipt report:\n%s", rep.Report)
	}
	if st := submitApproved("approver", approver); st.Status != "done" {
		t.Fatalf("the package's approver's approval: %+v", st)
	}
}

// TestMCPGuard: a tool that panics answers with an error; the server
// goes on.
func TestMCPGuard(t *testing.T) {
	h := guard(func(context.Context, *mcp.CallToolRequest, putIn) (*mcp.CallToolResult, putOut, error) {
		var m map[string]int
		m["x"] = 1 // a nil map: panics
		return nil, putOut{}, nil
	})
	_, _, err := h(context.Background(), nil, putIn{})
	if err == nil || !strings.Contains(err.Error(), "internal error (a bug in hg): assignment to entry in nil map") {
		t.Fatalf("a panicking tool: %v", err)
	}
}

// TestMCPLearnsNothingByDefault: a client's answers bind the run they
// were given for, and no other. Without hg mcp --learn naming the class,
// a run that reaches its outcome writes no belief event, so the
// operator's next order of the class is asked again; another class
// named by --learn does not open this one; hg resume of the run learns
// nothing either.
func TestMCPLearnsNothingByDefault(t *testing.T) {
	f := newMCPFixture(t)
	cs := f.connect(t, mcpOptions{Learn: []string{"other"}})
	before := storeState(t, f.store)
	var sub submitOut
	call(t, cs, "submit", map[string]any{"workorder": "workorders/release.json",
		"answers": map[string]any{"platform": "darwin", "channel": "stable", "retention": 1}}, &sub)
	if st := waitRun(t, cs, sub.Run); st.Status != "done" {
		t.Fatalf("run %s: %+v", sub.Run, st)
	}
	// The run used the answers.
	var rep reportOut
	call(t, cs, "report", map[string]any{"ref": sub.Run}, &rep)
	if !strings.Contains(rep.Report, "channel = \"stable\"  (asked, answered by an MCP client)") {
		t.Fatalf("report:\n%s", rep.Report)
	}
	var b beliefOut
	call(t, cs, "belief", map[string]any{"class": "release"}, &b)
	if len(b.Log) != 0 {
		t.Fatalf("a client's answers were learned: %+v", b)
	}
	var plan planOut
	call(t, cs, "plan", map[string]any{"workorder": "workorders/release.json"}, &plan)
	if len(plan.Open) != 3 {
		t.Fatalf("the next plan: open %v, want all three", plan.Open)
	}
	// Resumed by the operator (the run is done: nothing runs), still nothing.
	if out, err := exec.Command(hgBinary(t), "--store", f.store, "resume", sub.Run).CombinedOutput(); err != nil {
		t.Fatalf("resume: %v: %s", err, out)
	} else if strings.Contains(string(out), "learned") {
		t.Fatalf("resume learned: %s", out)
	}
	after := storeState(t, f.store)
	for line := range strings.SplitSeq(after, "\n") {
		if strings.HasPrefix(line, "ref belief/") {
			t.Fatalf("a belief ref was written: %s\n%s", line, before)
		}
	}
}

// TestMCPPackageSymlinkOutRefused: a package whose file is a symlink
// leading out of the root (loading would read the file out there, and
// only the link would be stored) is refused before it is loaded; one
// whose symlink stays inside the root is run.
func TestMCPPackageSymlinkOutRefused(t *testing.T) {
	f := newMCPFixture(t)
	outside := t.TempDir()
	schema := filepath.Join(outside, "input.schema.json")
	if err := os.WriteFile(schema, []byte(`{"type": "object"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"outlink", "inlink"} {
		dir := filepath.Join(f.root, "haygents", p)
		if out, err := exec.Command("cp", "-a", "../../fixtures/haygents/echo", dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, out)
		}
		target := schema
		if p == "inlink" {
			target = "../../echo/contracts/input.schema.json"
		}
		file := filepath.Join(dir, "contracts", "input.schema.json")
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, file); err != nil {
			t.Fatal(err)
		}
		f.write(t, "workorders/"+p+".json", `{"workorder": "`+p+`", "objective": "a package with a symlink",
			"nodes": {"n": {"haygent": "../haygents/`+p+`", "input": {"value": 1, "trail": []}}}}`)
	}
	cs := f.connect(t, mcpOptions{})
	for _, tool := range []string{"plan", "submit"} {
		msg := refused(t, cs, tool, map[string]any{"workorder": "workorders/outlink.json"})
		if !strings.Contains(msg, "symlink contracts/input.schema.json") || !strings.Contains(msg, "outside") || strings.Contains(msg, outside) {
			t.Errorf("%s of a package with a symlink out: %s", tool, msg)
		}
	}
	var sub submitOut
	call(t, cs, "submit", map[string]any{"workorder": "workorders/inlink.json"}, &sub)
	if st := waitRun(t, cs, sub.Run); st.Status != "done" {
		t.Fatalf("a package whose symlink stays inside: %+v", st)
	}
}

// forgePage stores a copy of the first page of node records of run with
// its first node edited, and returns its CID, for forgeRun to link.
func forgePage(t *testing.T, dir, run string, edit func(node map[string]any)) cid.Cid {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := st.GetRef(ctx, scheduler.RefNamespace, run)
	if err != nil {
		t.Fatal(err)
	}
	decode := func(c cid.Cid) map[string]any {
		data, err := st.Get(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		n, err := cas.DecodeNode(data)
		if err != nil {
			t.Fatal(err)
		}
		return n.(map[string]any)
	}
	page := decode(decode(c)["pages"].([]any)[0].(cid.Cid))
	edit(page["nodes"].([]any)[0].(map[string]any))
	enc, err := cas.EncodeNode(page)
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, enc)
	if err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	return b.CID()
}
