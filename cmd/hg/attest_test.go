package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/cas/boltstore"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/internal/tamper"
	"github.com/haygent/hg/scheduler"
	v1 "github.com/in-toto/attestation/go/v1"
	"github.com/ipfs/go-cid"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
)

// These tests read hg attest's output with the in-toto and DSSE
// libraries alone: the envelopes are parsed and verified by
// go-securesystemslib's dsse package, the statements by in-toto's
// attestation/go/v1 (protobuf, validated). Nothing of hg checks them.

// libKey is an ed25519 public key as the DSSE library verifies with it.
// Its keyid is the text form 'hg key show' prints, worked out here.
type libKey struct{ pub ed25519.PublicKey }

func (k libKey) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(k.pub, data, sig) {
		return errors.New("bad signature")
	}
	return nil
}
func (k libKey) KeyID() (string, error) {
	return "ed25519:" + base64.RawURLEncoding.EncodeToString(k.pub), nil
}
func (k libKey) Public() crypto.PublicKey { return k.pub }

// parseShownKey parses 'hg key show' output, without hg's parser.
func parseShownKey(t *testing.T, shown string) ed25519.PublicKey {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(shown), "ed25519:"))
	if err != nil || len(b) != ed25519.PublicKeySize {
		t.Fatalf("key %q: %v", shown, err)
	}
	return b
}

// envelopesOf parses JSON Lines of DSSE envelopes.
func envelopesOf(t *testing.T, data []byte) []*dsse.Envelope {
	t.Helper()
	var out []*dsse.Envelope
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var e dsse.Envelope
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("a line is not an envelope: %v\n%s", err, line)
		}
		out = append(out, &e)
	}
	return out
}

// libVerify verifies env with the DSSE library against pub, and parses
// and validates its statement with the in-toto library.
func libVerify(pub ed25519.PublicKey, env *dsse.Envelope) (*v1.Statement, error) {
	ev, err := dsse.NewEnvelopeVerifier(libKey{pub})
	if err != nil {
		return nil, err
	}
	if _, err := ev.Verify(context.Background(), env); err != nil {
		return nil, err
	}
	if env.PayloadType != "application/vnd.in-toto+json" {
		return nil, errors.New("payload type " + env.PayloadType)
	}
	body, err := env.DecodeB64Payload()
	if err != nil {
		return nil, err
	}
	var st v1.Statement
	if err := protojson.Unmarshal(body, &st); err != nil {
		return nil, err
	}
	return &st, st.Validate()
}

// attestFile runs hg attest ARG -o FILE, wants exit want, and returns
// the file's bytes (nil if it was not written) and stderr.
func attestFile(t *testing.T, hg func(args ...string) (string, string, int), arg string, want int) ([]byte, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.jsonl")
	out, errOut, code := hg("attest", arg, "-o", path)
	if code != want {
		t.Fatalf("attest %s: exit %d, want %d\n%s%s", arg, code, want, out, errOut)
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errOut
	}
	if err != nil {
		t.Fatal(err)
	}
	return data, errOut
}

// predicateOf returns the statement's predicate as JSON values.
func predicateOf(t *testing.T, st *v1.Statement) map[string]any {
	t.Helper()
	return st.GetPredicate().AsMap()
}

// blockSHA256 is the sha256 of the block c holds, read with hg block get.
func blockSHA256(t *testing.T, hg func(args ...string) (string, string, int), c string) string {
	t.Helper()
	out, errOut, code := hg("block", "get", c)
	if code != 0 {
		t.Fatalf("block get %s: exit %d: %s", c, code, errOut)
	}
	sum := sha256.Sum256([]byte(out))
	return hex.EncodeToString(sum[:])
}

// TestAttestReceiptVerifiesWithLibraries: the envelope hg attest writes
// for a verified PASS verifies with the DSSE library under the store's
// runner key, and its statement parses and validates with the in-toto
// library: predicate type, the receipt's CID and status, the final
// workspace named "." by the sha256 of its root block. The same envelope
// with its payload changed, its signature changed, its payload type
// changed, or checked against another key, is refused by the library.
func TestAttestReceiptVerifiesWithLibraries(t *testing.T) {
	_, hg := ledgerStore(t)
	shown, _, _ := hg("key", "show")
	pub := parseShownKey(t, shown)
	data, _ := attestFile(t, hg, "rt", 0)
	envs := envelopesOf(t, data)
	if len(envs) != 1 {
		t.Fatalf("%d envelopes for one receipt, want 1:\n%s", len(envs), data)
	}
	env := envs[0]
	if len(env.Signatures) != 1 || env.Signatures[0].KeyID != strings.TrimSpace(shown) {
		t.Fatalf("signatures %+v, want one by %s", env.Signatures, shown)
	}
	st, err := libVerify(pub, env)
	if err != nil {
		t.Fatalf("the libraries refuse hg's envelope: %v", err)
	}
	if st.GetType() != "https://in-toto.io/Statement/v1" || st.GetPredicateType() != "https://haygent.dev/hg/receipt/v1" {
		t.Errorf("statement type %q, predicate type %q", st.GetType(), st.GetPredicateType())
	}
	p := predicateOf(t, st)
	rt, _, _ := hg("dag", "get", "rt")
	var receipt map[string]any
	if err := json.Unmarshal([]byte(rt), &receipt); err != nil {
		t.Fatal(err)
	}
	out, _, _ := hg("pin", "ls", "--json")
	if !strings.Contains(out, p["receipt"].(string)) {
		t.Errorf("predicate receipt %v is not the pinned receipt: %s", p["receipt"], out)
	}
	if p["status"] != "PASS" || p["haygent"] != receipt["haygent"] || p["receiptSigner"] != strings.TrimSpace(shown) {
		t.Errorf("predicate status %v haygent %v signer %v", p["status"], p["haygent"], p["receiptSigner"])
	}
	if l, ok := p["limitations"].([]any); !ok || len(l) != 0 {
		t.Errorf("limitations %#v, want an empty list", p["limitations"])
	}
	final := receipt["final_workspace"].(map[string]any)["/"].(string)
	subj := st.GetSubject()
	if len(subj) != 1 || subj[0].GetName() != "." || subj[0].GetDigest()["sha256"] != blockSHA256(t, hg, final) {
		t.Errorf("subjects %v, want the final workspace %s as . by the sha256 of its root block", subj, final)
	}
	if subj[0].GetAnnotations().AsMap()["hg.cid"] != final {
		t.Errorf("subject annotations %v, want hg.cid %s", subj[0].GetAnnotations(), final)
	}

	copyEnv := func() *dsse.Envelope {
		e := *env
		e.Signatures = append([]dsse.Signature(nil), env.Signatures...)
		return &e
	}
	body, _ := env.DecodeB64Payload()
	forged := copyEnv()
	forged.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(body, []byte(`"status":"PASS"`), []byte(`"status":"HALT"`), 1))
	if forged.Payload == env.Payload {
		t.Fatal("the payload holds no status to change")
	}
	resigned := copyEnv()
	sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	sig[5] ^= 1
	resigned.Signatures[0].Sig = base64.StdEncoding.EncodeToString(sig)
	retyped := copyEnv()
	retyped.PayloadType = "application/json"
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	for name, c := range map[string]struct {
		env *dsse.Envelope
		pub ed25519.PublicKey
	}{"payload changed": {forged, pub}, "signature changed": {resigned, pub}, "payload type changed": {retyped, pub}, "another key": {env, other}} {
		if _, err := libVerify(c.pub, c.env); err == nil {
			t.Errorf("%s: the DSSE library accepts the envelope", name)
		}
	}
}

// TestAttestRunNodes: for a run, one envelope per node the scheduler
// accepted, in node name order, none for the node that failed; each
// verifies with the libraries and names the file the node wrote by the
// sha256 of its content; the output is the same bytes every time, on
// stdout too. RUN/NODE attests one node; a failed node is refused. A
// node accepted from the memo is attested as such.
func TestAttestRunNodes(t *testing.T) {
	_, hg := ledgerStore(t)
	shown, _, _ := hg("key", "show")
	pub := parseShownKey(t, shown)
	wo := filepath.Join("..", "..", "fixtures", "workorders", "attest.json")
	if out, errOut, code := hg("run", "--run-id", "run-attest", wo); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	data, _ := attestFile(t, hg, "run-attest", 0)
	envs := envelopesOf(t, data)
	want := []struct{ node, content string }{{"build", "hello\n"}, {"check", "checked\n"}}
	if len(envs) != len(want) {
		t.Fatalf("%d envelopes, want %d (build, check; not probe):\n%s", len(envs), len(want), data)
	}
	for i, w := range want {
		st, err := libVerify(pub, envs[i])
		if err != nil {
			t.Fatalf("envelope %d: %v", i, err)
		}
		p := predicateOf(t, st)
		node := p["workOrder"].(map[string]any)
		if node["node"] != w.node || node["run"] != "run-attest" || p["status"] != "PASS" {
			t.Errorf("envelope %d: workOrder %v status %v, want node %s of run-attest", i, node, p["status"], w.node)
		}
		sum := sha256.Sum256([]byte(w.content))
		var names []string
		found := false
		for _, s := range st.GetSubject() {
			names = append(names, s.GetName())
			if s.GetName() == "out/result.txt" {
				found = s.GetDigest()["sha256"] == hex.EncodeToString(sum[:])
			}
		}
		if !found || strings.Join(names, " ") != ". out/result.txt" {
			t.Errorf("node %s: subjects %v, want . and out/result.txt with the sha256 of %q", w.node, st.GetSubject(), w.content)
		}
	}
	again, _ := attestFile(t, hg, "run-attest", 0)
	stdout, _, code := hg("attest", "run-attest", "-o", "-")
	if code != 0 || !bytes.Equal(again, data) || stdout != string(data) {
		t.Errorf("a second attestation differs (exit %d): file equal %v, stdout equal %v", code, bytes.Equal(again, data), stdout == string(data))
	}
	one, _ := attestFile(t, hg, "run-attest/check", 0)
	if lines := envelopesOf(t, one); len(lines) != 1 || !bytes.Equal(append(one[:0:0], one...), []byte(strings.SplitAfter(string(data), "\n")[1])) {
		t.Errorf("run-attest/check: want the check line of the run's attestation, got\n%s", one)
	}
	if got, errOut := attestFile(t, hg, "run-attest/probe", 1); got != nil || !strings.Contains(errOut, "node probe of run run-attest is failed, not accepted") {
		t.Errorf("a failed node: file %q, stderr %s", got, errOut)
	}

	// The same order again: its nodes are accepted from the memo, and
	// their attestations say so, naming the receipts the first run made.
	if out, errOut, code := hg("run", "--run-id", "run-again", wo); code != 0 {
		t.Fatalf("run again: exit %d\n%s%s", code, out, errOut)
	}
	memo, _ := attestFile(t, hg, "run-again/build", 0)
	st, err := libVerify(pub, envelopesOf(t, memo)[0])
	if err != nil {
		t.Fatal(err)
	}
	first, _ := libVerify(pub, envs[0])
	p, p0 := predicateOf(t, st), predicateOf(t, first)
	if node := p["workOrder"].(map[string]any); node["memo"] != true || node["run"] != "run-again" || p["receipt"] != p0["receipt"] {
		t.Errorf("a memo hit: workOrder %v receipt %v, want memo true in run-again and the receipt %v", node, p["receipt"], p0["receipt"])
	}
}

// TestAttestRefusesWhatDoesNotVerify: a receipt signed by a key the
// store does not trust, one whose chain was tampered with and re-signed,
// and a run whose record was forged are refused with exit 4, a HALT with
// exit 1; in every case the output file is left as it was.
func TestAttestRefusesWhatDoesNotVerify(t *testing.T) {
	dir, hg := ledgerStore(t)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	rewrite(t, dir, "rt", "foreign", stranger, func(string, map[string]any) {})
	if out, errOut, code := hg("haygent", "run", filepath.Join("..", "..", "fixtures", "haygents", "fail"), "--pin", "halted"); code != 3 {
		t.Fatalf("fail fixture: exit %d\n%s%s", code, out, errOut)
	}
	// Two transitions swapped, re-signed with the trusted key.
	writerRun(t, hg, "w")
	func() {
		st, err := boltstore.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := context.Background()
		key, err := ledger.LoadKey(keyPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		w, err := st.Pin(ctx, "w")
		if err != nil {
			t.Fatal(err)
		}
		c, err := tamper.Apply(ctx, st, "swap", w, cid.Undef, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetPin(ctx, "swapped", c); err != nil {
			t.Fatal(err)
		}
	}()
	wo := filepath.Join("..", "..", "fixtures", "workorders", "attest.json")
	if out, errOut, code := hg("run", "--run-id", "run-honest", wo); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	forgeRun(t, dir, "run-honest", "run-forged", func(root map[string]any) { root["status"] = "halted" })

	path := filepath.Join(t.TempDir(), "out.jsonl")
	const before = "what was there before\n"
	for _, c := range []struct {
		arg    string
		code   int
		stderr string
	}{
		{"foreign", 4, ": trusted signer: signer ed25519:"},
		{"swapped", 4, "transition chain"},
		{"run-forged", 4, "attest refused: verification failed: run run-honest: outcome"},
		{"halted", 1, "the receipt is not a PASS: it is a HALT"},
	} {
		if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := hg("attest", c.arg, "-o", path)
		if code != c.code || !strings.Contains(errOut, c.stderr) {
			t.Errorf("attest %s: exit %d, want %d with %q\n%s%s", c.arg, code, c.code, c.stderr, out, errOut)
		}
		if c.arg == "foreign" && !strings.Contains(errOut, "\nhg: hint: if you trust that runner, say so: 'hg key trust PUBKEY|FILE'\n") {
			t.Errorf("attest foreign: no hint to trust the runner:\n%s", errOut)
		}
		if got, _ := os.ReadFile(path); string(got) != before {
			t.Errorf("attest %s: the output file was changed to %.200q", c.arg, got)
		}
	}
}

// writerRun runs the writer fixture, which writes out/result.txt, pinned
// as pin.
func writerRun(t *testing.T, hg func(args ...string) (string, string, int), pin string) {
	t.Helper()
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte(`{"text": "hello"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := hg("haygent", "run", filepath.Join("..", "..", "fixtures", "haygents", "writer"), "--input", in, "--pin", pin); code != 0 {
		t.Fatalf("writer: exit %d\n%s%s", code, out, errOut)
	}
}

// TestAttestChecksArtifacts: the receipt's artifacts are not among the
// checks of hg verify, so a runner holding a trusted key could name
// another file, or a digest its file does not have, and the receipt
// would still verify. hg attest reads each artifact's content and checks
// it against the recorded digest and the run's mutation evidence, and
// refuses (exit 4) a receipt where they disagree, or whose artifact path
// is not a clean relative path; the refusal is one escaped line, whatever
// the forged path holds.
func TestAttestChecksArtifacts(t *testing.T) {
	dir, hg := ledgerStore(t)
	writerRun(t, hg, "w")
	otherFile, _, code := hg("put", filepath.Join("..", "..", "fixtures", "workspaces", "artifact", "data.bin"))
	if code != 0 {
		t.Fatal("put failed")
	}
	other, err := cas.ParseCID(strings.TrimSpace(otherFile))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "workspaces", "artifact", "data.bin"))
	if err != nil {
		t.Fatal(err)
	}
	otherSum := sha256.Sum256(data)
	artifact := func(edit func(a map[string]any)) func(string, map[string]any) {
		return func(typ string, n map[string]any) {
			if typ == ledger.TypeReceipt {
				edit(n["artifacts"].([]any)[0].(map[string]any))
			}
		}
	}
	rewrite(t, dir, "w", "bad-digest", nil, artifact(func(a map[string]any) { a["digest"] = strings.Repeat("0", 64) }))
	rewrite(t, dir, "w", "other-file", nil, artifact(func(a map[string]any) {
		a["file"], a["digest"] = other, hex.EncodeToString(otherSum[:])
	}))
	rewrite(t, dir, "w", "dotdot", nil, artifact(func(a map[string]any) { a["path"] = "../outside.txt" }))
	rewrite(t, dir, "w", "evil-path", nil, artifact(func(a map[string]any) { a["path"] = "out/\x1b[2K\r\nwrote 9 envelopes" }))
	for _, c := range []struct{ pin, stderr string }{
		{"bad-digest", "its content has sha256"},
		{"other-file", "the last mutation of it observed sha256"},
		{"dotdot", `artifact "../outside.txt"`},
		{"evil-path", `no mutation evidence of the run wrote it`},
	} {
		if out, errOut, code := hg("verify", c.pin); code != 0 {
			t.Fatalf("verify %s: exit %d: the premise fails (hg verify now checks artifacts?)\n%s%s", c.pin, code, out, errOut)
		}
		got, errOut := attestFile(t, hg, c.pin, 4)
		if got != nil || !strings.Contains(errOut, c.stderr) || !strings.Contains(errOut, "does not match what the run observed") {
			t.Errorf("attest %s: file %.200q, stderr %s", c.pin, got, errOut)
		}
		if rawControl.MatchString(errOut) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("attest %s: stderr is not one escaped line: %q", c.pin, errOut)
		}
	}
}

// TestAttestReceiptOfAnotherTrustedKey: a receipt signed by a key the
// store trusts (a worker's) is attested with the store's runner key: the
// envelope's keyid is the runner key, the predicate names the receipt's
// signer, and the envelope does not verify under the worker's key.
func TestAttestReceiptOfAnotherTrustedKey(t *testing.T) {
	dir, hg := ledgerStore(t)
	workerPub, worker, _ := ed25519.GenerateKey(rand.Reader)
	rewrite(t, dir, "rt", "by-worker", worker, func(string, map[string]any) {})
	workerText := "ed25519:" + base64.RawURLEncoding.EncodeToString(workerPub)
	if out, errOut, code := hg("key", "trust", workerText); code != 0 {
		t.Fatalf("key trust: exit %d\n%s%s", code, out, errOut)
	}
	shown, _, _ := hg("key", "show")
	data, _ := attestFile(t, hg, "by-worker", 0)
	env := envelopesOf(t, data)[0]
	st, err := libVerify(parseShownKey(t, shown), env)
	if err != nil {
		t.Fatal(err)
	}
	if env.Signatures[0].KeyID != strings.TrimSpace(shown) {
		t.Errorf("keyid %s, want the runner key %s", env.Signatures[0].KeyID, shown)
	}
	if p := predicateOf(t, st); p["receiptSigner"] != workerText {
		t.Errorf("receiptSigner %v, want the worker's %s", p["receiptSigner"], workerText)
	}
	if _, err := libVerify(workerPub, env); err == nil {
		t.Error("the envelope verifies under the worker's key, which did not sign it")
	}
}

// dsseverify FILE KEYFILE: verify every line of FILE as a DSSE envelope
// signed by the key 'hg key show' wrote to KEYFILE, with the DSSE and
// in-toto libraries alone, and print per envelope its predicate type and
// each subject as NAME sha256:HEX.
func cmdDSSEVerify(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: dsseverify FILE KEYFILE")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	shown, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	pub, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(string(shown)), "ed25519:"))
	ts.Check(err)
	var failed error
	for n, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var env dsse.Envelope
		if err := json.Unmarshal(line, &env); err != nil {
			failed = fmt.Errorf("line %d: %v", n+1, err)
			break
		}
		st, err := libVerify(ed25519.PublicKey(pub), &env)
		if err != nil {
			failed = fmt.Errorf("line %d: %v", n+1, err)
			break
		}
		fmt.Fprintf(ts.Stdout(), "%s\n", st.GetPredicateType())
		for _, s := range st.GetSubject() {
			fmt.Fprintf(ts.Stdout(), "  %s sha256:%s\n", s.GetName(), s.GetDigest()["sha256"])
		}
	}
	switch {
	case neg && failed == nil:
		ts.Fatalf("every envelope verifies")
	case !neg && failed != nil:
		ts.Fatalf("%v", failed)
	}
}

// standing is a store where runs moved after their work was accepted:
// run-reg, whose node build a recheck regressed (its signer taken out of
// trust, then trusted again, so that its receipts verify once more);
// run-wd, whose node check a person withdrew; and run-src, whose receipts
// run-memo took from the memo and a recheck of run-memo regressed there,
// while run-src still holds them done. It keeps each run's record and
// receipts as they were before.
type standing struct {
	dir    string
	hg     func(args ...string) (string, string, int)
	oldPub string // the key that signed every run, trusted again
	// The records before the moves, and the receipts of the nodes.
	regBefore, wdBefore                  string
	regBuild, regCheck, wdBuild, wdCheck string
	srcBuild, srcCheck                   string
}

func newStanding(t *testing.T) *standing {
	t.Helper()
	dir, hg := ledgerStore(t)
	s := &standing{dir: dir, hg: hg}
	must := func(want int, args ...string) string {
		t.Helper()
		out, errOut, code := hg(args...)
		if code != want {
			t.Fatalf("hg %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out
	}
	wo := filepath.Join("..", "..", "fixtures", "workorders", "attest.json")
	must(0, "run", "--run-id", "run-src", wo)
	must(0, "run", "--run-id", "run-memo", wo)
	must(0, "run", "--run-id", "run-reg", "--no-cache", wo)
	must(0, "run", "--run-id", "run-wd", "--no-cache", wo)
	var reg, wd map[string]string
	s.regBefore, reg = runRecord(t, dir, "run-reg")
	s.wdBefore, wd = runRecord(t, dir, "run-wd")
	s.regBuild, s.regCheck, s.wdBuild, s.wdCheck = reg["build"], reg["check"], wd["build"], wd["check"]
	_, src := runRecord(t, dir, "run-src")
	s.srcBuild, s.srcCheck = src["build"], src["check"]
	if _, memo := runRecord(t, dir, "run-memo"); memo["build"] != s.srcBuild || s.regBuild == s.srcBuild || s.wdBuild == s.srcBuild {
		t.Fatalf("run-memo holds %s, run-src %s, run-reg %s: want run-memo alone to take run-src's from the memo", memo["build"], s.srcBuild, s.regBuild)
	}

	must(0, "withdraw", "run-wd", "check", "--why", "bad output")
	s.oldPub = strings.TrimSpace(must(0, "key", "show"))
	if err := os.Rename(keyPath(dir), filepath.Join(t.TempDir(), "old.key")); err != nil {
		t.Fatal(err)
	}
	must(0, "key", "gen")
	must(0, "key", "trust", s.oldPub)
	must(0, "key", "untrust", s.oldPub)
	must(4, "recheck", "run-reg")
	must(4, "recheck", "run-memo")
	must(0, "key", "trust", s.oldPub)
	return s
}

// runRecord returns the CID of run's latest record and each node's
// receipt.
func runRecord(t *testing.T, dir, run string) (string, map[string]string) {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, c, err := scheduler.LoadRecord(ctx, st, run)
	if err != nil {
		t.Fatal(err)
	}
	receipts := map[string]string{}
	for _, n := range rec.Nodes {
		if n.Receipt != nil {
			receipts[n.Name] = n.Receipt.Cid.String()
		}
	}
	return c.String(), receipts
}

// forgeRecordAs stores a copy of the run record rec under the run id
// as, every node marked a memo hit (so that no receipt need name the run),
// and sets no ref: a record of a run this store never had. It returns
// the copy's CID.
func forgeRecordAs(t *testing.T, dir, rec, as string) string {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := cas.ParseCID(rec)
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := tamper.EditRecord(ctx, st, c, func(root map[string]any) { root["run"] = as },
		func(n map[string]any) bool { n["memo"] = true; return true })
	if err != nil {
		t.Fatal(err)
	}
	return forged.String()
}

// TestAttestOnlyWhatTheRunStillHolds: hg attest signs a PASS only for
// work its run still stands on. A receipt a recheck regressed, the
// receipt of a node blocked below it, and a receipt a person withdrew are
// refused (exit 1), though each verifies alone; so is a record that is
// no longer its run's latest, which still says the nodes were done, and a
// record of a run this store does not have. What the runs still hold is
// attested. A receipt whose run is not in the store (imported from a
// bundle) is attested only when asked with --without-run.
func TestAttestOnlyWhatTheRunStillHolds(t *testing.T) {
	s := newStanding(t)
	forged := forgeRecordAs(t, s.dir, s.regBefore, "run-20991231-235959-eeeeeeeeeeee")
	if out, errOut, code := s.hg("verify", forged); code != 0 {
		t.Fatalf("the forged record does not verify (exit %d): the premise fails\n%s%s", code, out, errOut)
	}
	// Each verifies alone (from a bundle, with no runs); against the
	// store, hg verify names the regression.
	for _, arg := range []string{s.regBuild, s.regCheck, s.wdCheck} {
		bundle := filepath.Join(t.TempDir(), "b.car")
		if out, errOut, code := s.hg("bundle", "export", arg, "-o", bundle); code != 0 {
			t.Fatalf("bundle export %s: exit %d\n%s%s", arg, code, out, errOut)
		}
		if out, errOut, code := s.hg("verify", "--bundle", bundle, "--key", s.oldPub); code != 0 {
			t.Fatalf("verify --bundle %s: exit %d: the premise fails\n%s%s", arg, code, out, errOut)
		}
		want := map[bool]int{true: exitIntegrity, false: 0}[arg != s.wdCheck]
		if out, errOut, code := s.hg("verify", arg); code != want || (want != 0) != strings.Contains(errOut, ": not regressed: regressed in run run-reg at ") {
			t.Fatalf("verify %s: exit %d, want %d\n%s%s", arg, code, want, out, errOut)
		}
	}
	for _, c := range []struct{ what, arg, stderr string }{
		{"the regressed receipt", s.regBuild, "attest refused: the receipt " + s.regBuild + ", which regressed in run run-reg at "},
		{"a receipt blocked below it", s.regCheck, "node check of run run-reg is blocked"},
		{"the withdrawn receipt", s.wdCheck, "receipt " + s.wdCheck + " of node check of run run-wd was withdrawn at "},
		{"the record before the recheck", s.regBefore, "record " + s.regBefore + " is not the latest record of run run-reg"},
		{"the record before the withdrawal", s.wdBefore, "record " + s.wdBefore + " is not the latest record of run run-wd"},
		{"a record of no run of this store", forged, "run run-20991231-235959-eeeeeeeeeeee is not a run of this store"},
		{"the withdrawn node", "run-wd/check", "node check of run run-wd is deleted, not accepted"},
		{"a receipt regressed in a run that took it from the memo", s.srcBuild, "the receipt " + s.srcBuild + ", which regressed in run run-memo at "},
		{"a receipt built from it", s.srcCheck, "receipt " + s.srcCheck + " is built from the receipt " + s.srcBuild + ", which regressed in run run-memo"},
		{"the run that still holds it", "run-src", "node build of run run-src is done with receipt " + s.srcBuild + ", which regressed in run run-memo"},
		{"its node", "run-src/check", "which regressed in run run-memo"},
	} {
		path := filepath.Join(t.TempDir(), "out.jsonl")
		_, errOut, code := s.hg("attest", c.arg, "-o", path)
		_, statErr := os.Stat(path)
		if code != 1 || !errors.Is(statErr, os.ErrNotExist) || !strings.Contains(errOut, c.stderr) || !strings.HasPrefix(errOut, "hg: error: ") {
			t.Errorf("attest %s (%s): exit %d, want 1, file written %v, stderr %s", c.arg, c.what, code, statErr == nil, errOut)
		}
	}
	// What the runs still hold is attested, by run and by receipt.
	data, _ := attestFile(t, s.hg, "run-wd", 0)
	if envs := envelopesOf(t, data); len(envs) != 1 {
		t.Errorf("run-wd: %d envelopes, want 1 (build)", len(envs))
	}
	attestFile(t, s.hg, s.wdBuild, 0)
	latest, _ := runRecord(t, s.dir, "run-wd")
	attestFile(t, s.hg, latest, 0)
	attestFile(t, s.hg, "run-wd/build", 0)
}

// TestAttestReceiptOfNoRunHere: a receipt of a run this store does not
// have (imported from a bundle) verifies, but whether its run still holds
// it cannot be known here: hg attest refuses it (exit 1) unless asked
// with --without-run, and then attests it on its own verification. A
// receipt that belongs to no run at all is attested as it is.
func TestAttestReceiptOfNoRunHere(t *testing.T) {
	dir, hg := ledgerStore(t)
	wo := filepath.Join("..", "..", "fixtures", "workorders", "attest.json")
	if out, errOut, code := hg("run", "--run-id", "run-there", wo); code != 0 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	_, receipts := runRecord(t, dir, "run-there")
	car := filepath.Join(t.TempDir(), "build.car")
	if out, errOut, code := hg("bundle", "export", receipts["build"], "-o", car); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	pub, _, _ := hg("key", "show")
	other := filepath.Join(t.TempDir(), ".haygent")
	hg2 := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--store", other}, args...), strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	for _, args := range [][]string{{"init"}, {"key", "gen"}, {"key", "trust", strings.TrimSpace(pub)}, {"bundle", "import", car}, {"verify", receipts["build"]}} {
		if out, errOut, code := hg2(args...); code != 0 {
			t.Fatalf("hg %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	got, errOut := attestFile(t, hg2, receipts["build"], 1)
	if got != nil || !strings.Contains(errOut, "is of run run-there, which is not a run of this store") {
		t.Errorf("a receipt of no run here: file %.100q, stderr %s", got, errOut)
	}
	if !strings.Contains(errOut, "hg: hint: ") || !strings.Contains(errOut, "--without-run") {
		t.Errorf("no hint of --without-run: %s", errOut)
	}
	path := filepath.Join(t.TempDir(), "out.jsonl")
	if out, errOut, code := hg2("attest", "--without-run", receipts["build"], "-o", path); code != 0 {
		t.Fatalf("attest --without-run: exit %d\n%s%s", code, out, errOut)
	}
	// A receipt of no run (hg haygent run) needs no flag.
	attestFile(t, hg, "rt", 0)
}
