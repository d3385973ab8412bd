package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/scheduler"
	"github.com/ipfs/go-cid"
)

// evilText is what a forged record or a step's output holds to take over
// a terminal or pass for a line of hg's: it clears the line, starts new
// ones that read as a listing's rows or a log's headers, and reverses
// what follows.
const evilText = "\x1b[2K\r\nrun-fake  pipeline  -  done\n== step fake, attempt 0, transition 0: exit 0\n\u202e"

// forgeRun stores, under the run id as, a copy of the record of run
// whose every string the edit may change, as a writer of a forged store
// would.
func forgeRun(t *testing.T, dir, run, as string, edit func(root map[string]any)) {
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
	data, err := st.Get(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	n, err := cas.DecodeNode(data)
	if err != nil {
		t.Fatal(err)
	}
	root := n.(map[string]any)
	edit(root)
	enc, err := cas.EncodeNode(root)
	if err != nil {
		t.Fatal(err)
	}
	b := cas.NewBlock(cas.DagCBOR, enc)
	if err := st.Put(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRef(ctx, scheduler.RefNamespace, as, b.CID()); err != nil {
		t.Fatal(err)
	}
}

// TestRunsListEscapesForgedRecords: hg runs and hg status print every
// string of a forged run record escaped, on its own row; no row begins as
// a forged one would; --json gives the strings exactly. A run whose
// record cannot be read is listed all the same ("unreadable") and named
// on stderr.
func TestRunsListEscapesForgedRecords(t *testing.T) {
	dir, hg := ledgerStore(t)
	pipeline := filepath.Join("..", "..", "fixtures", "workorders", "pipeline.json")
	if out, errOut, code := hg("run", "--run-id", "run-honest", pipeline); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	forgeRun(t, dir, "run-honest", "run-evil", func(root map[string]any) {
		root["name"] = "pipeline" + evilText
		root["class"] = evilText
		root["status"] = "done" + evilText
		root["reason"] = evilText
		root["run"] = "run-honest" + evilText
	})
	forgeRun(t, dir, "run-honest", "run-broken", func(root map[string]any) {
		root["type"] = "hg/packet@1" + evilText
	})
	forgedRow := regexp.MustCompile(`(?m)^(run-fake|== step fake)`)
	for _, args := range [][]string{{"runs"}, {"status"}} {
		out, errOut, code := hg(args...)
		if code != 0 {
			t.Fatalf("hg %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		for name, text := range map[string]string{"stdout": out, "stderr": errOut} {
			if loc := rawControl.FindStringIndex(text); loc != nil {
				t.Errorf("hg %s: %s holds %q at %d:\n%s", strings.Join(args, " "), name, text[loc[0]:loc[1]], loc[0], text)
			}
			if m := forgedRow.FindString(text); m != "" {
				t.Errorf("hg %s: %s has the forged row %q:\n%s", strings.Join(args, " "), name, m, text)
			}
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 4 { // the header and three runs
			t.Errorf("hg %s: %d lines, want a header and 3 runs:\n%s", strings.Join(args, " "), len(lines), out)
		}
		if !strings.Contains(out, `pipeline\x1b[2K\r\nrun-fake  pipeline  -  done\n== step fake`) {
			t.Errorf("hg %s: the forged name is not shown escaped:\n%s", strings.Join(args, " "), out)
		}
		if !regexp.MustCompile(`(?m)^run-broken +- +- +unreadable +- +- +-$`).MatchString(out) {
			t.Errorf("hg %s: the unreadable run is not listed:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(errOut, "hg: warning: run run-broken: its record cannot be read: ") {
			t.Errorf("hg %s: stderr does not name the unreadable run: %q", strings.Join(args, " "), errOut)
		}
	}
	out, errOut, code := hg("runs", "--json")
	if code != 0 {
		t.Fatalf("runs --json: exit %d\n%s%s", code, out, errOut)
	}
	var list []runJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, out)
	}
	got := map[string]runJSON{}
	for _, r := range list {
		got[r.Run] = r
	}
	if r := got["run-evil"]; r.WorkOrder != "pipeline"+evilText || r.Class != evilText || r.Reason != evilText {
		t.Errorf("runs --json changed the forged strings: %+v", r)
	}
	if r := got["run-broken"]; r.Status != "unreadable" || r.Error == "" {
		t.Errorf("runs --json: the unreadable run: %+v", r)
	}
	if r := got["run-honest"]; r.Status != scheduler.StatusDone || r.Nodes != 6 || r.Done != 6 || r.DurationMS == nil {
		t.Errorf("runs --json: the honest run: %+v", r)
	}
	// --status keeps what it names; a status hg does not know is usage.
	if out, _, code := hg("runs", "--status", "unreadable"); code != 0 || strings.Contains(out, "run-honest") || !strings.Contains(out, "run-broken") {
		t.Errorf("runs --status unreadable: exit %d\n%s", code, out)
	}
	if _, errOut, code := hg("runs", "--status", "finished"); code != exitUsage || !strings.Contains(errOut, "want one of running, done, halted, cancelled, unreadable") {
		t.Errorf("runs --status finished: exit %d, %q", code, errOut)
	}
}

// TestLogsEscapeForgedOutput: a receipt whose exit evidence was forged to
// name output that takes over a terminal, under a step whose name does
// too, re-signed with the trusted key: hg logs prints the step and every
// line of the output escaped, the lines indented under the headers, so
// that no line passes for a header; --raw writes the bytes as stored;
// hg report shows the last lines of the failed step escaped, behind a
// bar.
func TestLogsEscapeForgedOutput(t *testing.T) {
	ctx := context.Background()
	dir, hg := ledgerStore(t)
	output := "first line\n" + evilText + "\ttabbed\nlast line\n"
	var stdoutCID, stderrCID cid.Cid
	func() {
		st, err := boltstore.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		out, errOut := cas.NewBlock(cas.Raw, []byte(output)), cas.NewBlock(cas.Raw, []byte("to stderr: "+evilText))
		if err := st.Put(ctx, out, errOut); err != nil {
			t.Fatal(err)
		}
		stdoutCID, stderrCID = out.CID(), errOut.CID()
	}()
	forged := false
	rewrite(t, dir, "rt", "forged", nil, func(typ string, n map[string]any) {
		if typ != ledger.TypeEvidence || forged {
			return
		}
		forged = true
		n["kind"] = "exit"
		n["step"] = "store" + evilText
		n["data"] = map[string]any{"code": int64(1), "timed_out": false, "argv": []any{"sh" + evilText},
			"stdout": stdoutCID.String(), "stderr": stderrCID.String(), "stdout_truncated": false, "stderr_truncated": false}
	})
	// A line a step wrote is shown whole (tabs kept), escaped and indented.
	noRaw := regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
	out, errOut, code := hg("logs", "forged")
	if code != 0 {
		t.Fatalf("logs: exit %d\n%s%s", code, out, errOut)
	}
	if loc := noRaw.FindStringIndex(out); loc != nil {
		t.Errorf("logs: stdout holds %q:\n%s", out[loc[0]:loc[1]], out)
	}
	headers := regexp.MustCompile(`(?m)^(==|--) `).FindAllString(out, -1)
	if len(headers) != 3 {
		t.Errorf("logs: %d header lines, want 3 (the step, stdout, stderr):\n%s", len(headers), out)
	}
	for _, want := range []string{
		`== step store\x1b[2K\r\nrun-fake  pipeline  -  done\n== step fake, attempt 0, transition 0: exit 0\n\u202e, attempt 0, transition `,
		"\n-- stdout: " + strconv.Itoa(len(output)) + " bytes (" + stdoutCID.String() + ")\n    first line\n    \\x1b[2K\\r\n    run-fake  pipeline  -  done\n    == step fake, attempt 0, transition 0: exit 0\n    \\u202e\ttabbed\n    last line\n-- stderr: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("logs: want\n%s\nin\n%s", want, out)
		}
	}
	raw, _, code := hg("logs", "forged", "--stdout", "--raw")
	if code != 0 || raw != output {
		t.Errorf("logs --raw: exit %d, %q; want the bytes as stored, %q", code, raw, output)
	}
	if _, errOut, code := hg("logs", "forged", "--raw"); code != exitUsage || !strings.Contains(errOut, "--raw writes one log and 2 match") {
		t.Errorf("logs --raw of two streams: exit %d, %q", code, errOut)
	}
	// The report: the failed step's last lines, escaped behind a bar.
	out, _, _ = hg("report", "forged")
	if loc := rawControl.FindStringIndex(out); loc != nil {
		t.Errorf("report: stdout holds %q:\n%s", out[loc[0]:loc[1]], out)
	}
	want := "\n           stderr, last 4 lines:\n           | to stderr: \\x1b[2K\\r\n           | run-fake  pipeline  -  done\n           | == step fake, attempt 0, transition 0: exit 0\n           | \\u202e\n    "
	if !strings.Contains(out, want) {
		t.Errorf("report: want the failed step's last lines\n%s\nin\n%s", want, out)
	}
	// The output gone (gc removes it: the evidence names it by CID, not
	// by link), hg logs says which and why, and exits 1.
	if out, errOut, code := hg("gc"); code != 0 {
		t.Fatalf("gc: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = hg("logs", "forged")
	if code != exitError || !strings.Contains(out, "-- stdout: cannot be read: ") || !strings.Contains(errOut, "2 logs of receipt ") {
		t.Errorf("logs after gc: exit %d\n%s%s", code, out, errOut)
	}
}

// TestProgressLine: the line a terminal shows while a run goes on.
func TestProgressLine(t *testing.T) {
	for _, c := range []struct {
		done, total, running, failed, blocked int
		elapsed                               time.Duration
		want                                  string
	}{
		{0, 8, 0, 0, 0, 0, "hg: 0/8 nodes done, 0s"},
		{3, 8, 2, 0, 0, 12*time.Second + 400*time.Millisecond, "hg: 3/8 nodes done, 2 running, 12s"},
		{5, 8, 0, 1, 2, 3*time.Minute + 5*time.Second, "hg: 5/8 nodes done, 1 failed, 2 blocked, 3m05s"},
		{99999, 100000, 4, 0, 0, 2*time.Hour + 7*time.Minute + 59*time.Second, "hg: 99999/100000 nodes done, 4 running, 2h08m"},
		{1, 2, 1, 0, 0, 250 * time.Millisecond, "hg: 1/2 nodes done, 1 running, 250ms"},
	} {
		if got := progressLine(c.done, c.total, c.running, c.failed, c.blocked, c.elapsed); got != c.want {
			t.Errorf("progressLine(%d, %d, %d, %d, %d, %v) = %q, want %q", c.done, c.total, c.running, c.failed, c.blocked, c.elapsed, got, c.want)
		}
	}
}

// TestRunProgressOnATerminal: on a terminal the run's progress is one
// line redrawn in place, a failed node also a line of its own (escaped)
// that stays, and nothing of it is left when the run ends; on a pipe, a
// line per finished node and no redrawing.
func TestRunProgressOnATerminal(t *testing.T) {
	evs := []scheduler.Event{
		{Node: "seed", State: "active"}, {Node: "seed", State: "concluded"}, {Node: "seed", State: "done"},
		{Node: "seed", State: "done", Committed: true},
		{Node: "probe", State: "active"}, {Node: "probe", State: "failed", Reason: "HALT" + evilText},
		{Node: "after", State: "blocked", Reason: "upstream probe did not pass"},
	}
	var term strings.Builder
	p := newRunProgress(&term, true, 3, nil)
	for _, ev := range evs {
		p.event(ev)
	}
	p.finish()
	got := term.String()
	if !strings.HasPrefix(got, "\rhg: 0/3 nodes done, ") {
		t.Errorf("terminal: does not start with the progress line: %q", got)
	}
	if strings.Count(got, "\n") != 1 || !strings.Contains(got, "hg: [1/3] probe failed: HALT\\x1b[2K\\r\\nrun-fake") {
		t.Errorf("terminal: want one line that stays, the failed node's, escaped: %q", got)
	}
	if strings.Contains(got, "seed done") || strings.Contains(got, "active") {
		t.Errorf("terminal: a line per node move: %q", got)
	}
	// Once the run ends, the last row is blanked and the cursor put back
	// at its start, for the outcome.
	if !regexp.MustCompile("\r +\r$").MatchString(got) {
		t.Errorf("terminal: the progress line is not cleared at the end: %q", got)
	}
	var pipe strings.Builder
	p = newRunProgress(&pipe, false, 3, map[string]string{"seed": "done"})
	for _, ev := range evs[4:] {
		p.event(ev)
	}
	p.finish()
	want := "hg: [1/3] probe failed: HALT\\x1b[2K\\r\\nrun-fake  pipeline  -  done\\n== step fake, attempt 0, transition 0: exit 0\\n\\u202e\n" +
		"hg: [1/3] after blocked: upstream probe did not pass\n"
	if pipe.String() != want {
		t.Errorf("pipe:\n%q\nwant\n%q", pipe.String(), want)
	}
}

// TestRemoveSparesActiveRuns: a run a process executes is never removed,
// by rm (even forced) or by prune; one recorded running that no process
// executes (its process died) is listed as interrupted, kept by prune,
// and removed by rm only with --force.
func TestRemoveSparesActiveRuns(t *testing.T) {
	dir, hg := ledgerStore(t)
	pipeline := filepath.Join("..", "..", "fixtures", "workorders", "pipeline.json")
	if out, errOut, code := hg("run", "--run-id", "run-busy", pipeline); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	forgeRun(t, dir, "run-busy", "run-stuck", func(root map[string]any) { root["status"] = scheduler.StatusRunning })
	unlock, err := lockRun(dir, "run-busy") // as the process executing it holds it
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := hg("runs")
	if code != 0 || !regexp.MustCompile(`(?m)^run-stuck +pipeline +- +interrupted `).MatchString(out) {
		t.Errorf("runs: exit %d, the dead run is not interrupted:\n%s%s", code, out, errOut)
	}
	for _, args := range [][]string{{"run", "rm", "run-busy"}, {"run", "rm", "--force", "run-busy"}, {"run", "rm", "--dry-run", "run-busy"}} {
		if _, errOut, code := hg(args...); code != exitError || !strings.Contains(errOut, "being executed") {
			t.Errorf("hg %s: exit %d, %q; want refused, being executed", strings.Join(args, " "), code, errOut)
		}
	}
	if _, errOut, code := hg("run", "rm", "run-stuck"); code != exitError || !strings.Contains(errOut, "the run is recorded running") || !strings.Contains(errOut, "--force") {
		t.Errorf("rm of a run recorded running: exit %d, %q", code, errOut)
	}
	out, errOut, code = hg("runs", "prune", "--older-than", "0s")
	if code != 0 {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"kept run run-busy: a process is executing it\n", "kept run run-stuck: recorded running\n", "removed 0 runs "} {
		if !strings.Contains(out, want) {
			t.Errorf("prune: want %q in\n%s", want, out)
		}
	}
	unlock()
	if out, errOut, code := hg("run", "rm", "--force", "run-stuck"); code != 0 || !strings.Contains(out, "removed run run-stuck (pipeline, running, ") {
		t.Errorf("rm --force of a run recorded running: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := hg("runs", "prune", "--older-than", "0s"); code != 0 || !strings.Contains(out, "removed run run-busy ") {
		t.Errorf("prune once the run is idle: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := hg("runs"); code != 0 || out != "" || !strings.Contains(errOut, "no runs in this store") {
		t.Errorf("runs after prune: exit %d\n%s%s", code, out, errOut)
	}
}
