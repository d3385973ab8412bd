package haygent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/haygent/hg/cas"
	"github.com/haygent/hg/haygent/evidence"
	"github.com/haygent/hg/haygent/ledger"
	"github.com/haygent/hg/haygent/perm"
	"github.com/haygent/hg/haygent/sandbox"
	"github.com/haygent/hg/haygent/workspace"
)

func (r *runner) execStep(s Step) (*ledger.Halt, error) {
	rec, err := r.begin(s, StepExec)
	if err != nil {
		return nil, err
	}
	argv, err := r.pkg.Permissions.Command(s.Command)
	if err != nil {
		rec.status = ledger.StepDenied
		rec.denied = []ledger.Denied{{Verb: "run", Kind: "command", Target: s.Command, Rule: perm.RuleDefault}}
		if err := r.record(rec); err != nil {
			return nil, err
		}
		return r.afterDenial(s, rec.denied), nil
	}
	r.used["run:command:"+s.Command] = true
	scratch, err := os.MkdirTemp("", "hg-step-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	work := filepath.Join(scratch, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return nil, err
	}
	if err := r.needWorkspace(); err != nil {
		return nil, err
	}
	// The workspace the command runs on, which its evidence vouches for.
	taken, err := r.snapshotWorkspace()
	if err != nil {
		return nil, fmt.Errorf("step %s: snapshot workspace: %w", s.ID, err)
	}
	on := &ledger.Vouching{Step: s.ID, Workspace: taken.Cid, Scope: ledger.Scope{Covers: s.Covers, Excludes: s.Outputs}}
	before, err := workspace.Scratch(r.workspace, r.pkg.Permissions, work, r.opts.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("step %s: scratch copy: %w", s.ID, err)
	}
	cache := r.opts.CacheDir
	if cache == "" {
		if uc, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(uc, "hg")
		} else {
			cache = filepath.Join(scratch, "cache")
		}
	}
	env := sandbox.DefaultEnv(map[string]string{
		"HOME":       filepath.Join(scratch, "home"),
		"TMPDIR":     filepath.Join(scratch, "tmp"),
		"GOCACHE":    filepath.Join(scratch, "gocache"), // the shared one, overlaid
		"GOMODCACHE": filepath.Join(cache, "gomod"),
		"GOPATH":     filepath.Join(cache, "gopath"),
	})
	sharedGoCache := filepath.Join(cache, "gocache")
	for _, d := range []string{env["HOME"], env["TMPDIR"], sharedGoCache, env["GOMODCACHE"], env["GOPATH"]} {
		os.MkdirAll(d, 0o700)
	}
	var secrets []string
	for _, name := range s.Secrets {
		if !r.pkg.Permissions.Check(perm.Op{Verb: "secret", Kind: "env", Target: name}).Allowed {
			rec.denied = append(rec.denied, ledger.Denied{Verb: "secret", Kind: "env", Target: name, Rule: perm.RuleDefault})
			continue
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			return nil, fmt.Errorf("step %s: secret %s is granted but not set in the environment", s.ID, name)
		}
		r.used["secret:"+name] = true
		env[name] = v
		secrets = append(secrets, v)
	}
	timeout, _ := time.ParseDuration(r.pkg.Manifest.Timeouts.Step)
	if s.Timeout != "" {
		timeout, _ = time.ParseDuration(s.Timeout)
	}
	spec := sandbox.Spec{
		Argv: argv, Dir: work, Env: env, Timeout: timeout,
		NoNetwork: r.pkg.Permissions.NetworkNone(), AllowUnisolated: r.mayRunUnisolated(),
		Secrets: secrets,
		// The step writes only its scratch directory (its copy of the
		// workspace, HOME and TMPDIR); the toolchain and the shared caches
		// it may only read, so no step can change what a later one builds.
		// It sees the shared build cache through an overlay whose
		// additions go when the step does.
		Confine:  true,
		Write:    []string{scratch},
		Read:     append(toolchainPaths(), sharedGoCache, env["GOMODCACHE"], env["GOPATH"]),
		Overlays: []sandbox.Overlay{{Lower: sharedGoCache, Target: env["GOCACHE"]}},
		// The workspace (the step works on a copy of what its grants let
		// it read) and the store are never in its view, even where they
		// lie under a path it may read.
		Hide: []string{r.workspace, r.opts.StoreDir},
	}
	if !spec.NoNetwork {
		set := r.pkg.Permissions
		spec.NetCheck = func(hostport string) (bool, string) {
			d := set.Check(perm.Op{Verb: perm.VerbNetwork, Kind: perm.KindHost, Target: hostport})
			return d.Allowed, d.Rule
		}
	}
	r.warmGoCache(spec, sharedGoCache)
	reportFormat, reportFile, _ := strings.Cut(s.Report, ":")
	var reportBefore fileMark
	if reportFile != "" {
		reportBefore = markFile(work, reportFile)
	}
	res, err := sandbox.Run(r.work, spec)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		if errors.Is(err, sandbox.ErrNoIsolation) {
			return nil, fmt.Errorf("step %s: %w%s", s.ID, err, r.unisolatedHint())
		}
		return nil, fmt.Errorf("step %s: %w", s.ID, err)
	}
	for _, d := range res.NetDenials {
		rec.denied = append(rec.denied, ledger.Denied{Verb: perm.VerbNetwork, Kind: perm.KindHost, Target: string(sandbox.Redact([]byte(d.Target), secrets)), Rule: d.Rule})
	}
	if res.NetDenialsDropped > 0 {
		rec.denied = append(rec.denied, ledger.Denied{Verb: perm.VerbNetwork, Kind: perm.KindHost, Target: fmt.Sprintf("(%d more)", res.NetDenialsDropped), Rule: "more refused connections than are recorded one by one"})
	}
	if err != nil {
		res.TimedOut = true // the run's time limit ended the step
	}
	for _, l := range res.Limitations {
		r.limitations = appendOnce(r.limitations, "step "+s.ID+": "+l)
	}
	stdout, err := r.putRaw(res.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := r.putRaw(res.Stderr)
	if err != nil {
		return nil, err
	}
	subject := "step:" + s.ID
	exitData := map[string]any{
		"code": int64(res.ExitCode), "timed_out": res.TimedOut, "signal": res.Signal,
		"argv": anySlice(argv), "stdout": stdout.String(), "stderr": stderr.String(),
		"stdout_truncated": res.StdoutTruncated, "stderr_truncated": res.StderrTruncated,
		"isolation":   anySlice(res.Isolation),
		"duration_ms": res.Finished.Sub(res.Started).Milliseconds(),
	}
	link, err := r.observeOn(s.ID, evidence.KindExit, subject, exitData, r.now(), on, stdout, stderr)
	if err != nil {
		return nil, err
	}
	rec.evidence = append(rec.evidence, link)
	if res.ExitCode != 0 {
		rec.status = ledger.StepFailed
	}
	if s.Report != "" {
		format, file := reportFormat, reportFile
		src := res.Stdout
		var unreadable string
		if file != "" {
			src, unreadable = readReport(work, file)
		}
		var data map[string]any
		if unreadable != "" {
			data = (&evidence.TestReport{Format: format, Problems: []string{unreadable}}).Data()
			data["invalid"] = unreadable
		} else if why := reportNotWritten(s.ID, file, reportBefore, markOf(src)); file != "" && src != nil && why != "" {
			data = (&evidence.TestReport{Format: format, Problems: []string{why}}).Data()
			data["invalid"] = why
		} else if file != "" && sandbox.Holds(src, secrets) {
			// Parsed, it would put the secret into names and messages.
			data = (&evidence.TestReport{Format: format, Problems: []string{
				"report " + file + " holds the value of a granted secret: refused as evidence"}}).Data()
		} else if rep, perr := evidence.ParseTestReport(format, bytes.NewReader(src)); perr != nil {
			data = (&evidence.TestReport{Format: format, Problems: []string{perr.Error()}}).Data()
		} else {
			data = rep.Data()
		}
		// Every string taken from the step's output is redacted before
		// it is stored, as the output itself is.
		data = redactStrings(data, secrets).(map[string]any)
		link, err := r.observeOn(s.ID, evidence.KindTestReport, subject, data, r.now(), on)
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	}
	// Changes the command made: applied where the write grants allow,
	// denied and recorded everywhere else.
	changes, err := workspace.Diff(before, work)
	if err != nil {
		return nil, fmt.Errorf("step %s: diff: %w", s.ID, err)
	}
	// A file holding a granted secret's value is never applied or stored.
	var clean workspace.Changes
	for _, c := range changes {
		if !utf8.ValidString(c.Path) {
			rec.denied = append(rec.denied, ledger.Denied{Verb: "write", Kind: "file", Target: strings.ToValidUTF8(c.Path, "\uFFFD"), Rule: "its name is not valid UTF-8"})
			continue
		}
		if sandbox.Holds([]byte(c.Path), secrets) {
			rec.denied = append(rec.denied, ledger.Denied{Verb: "write", Kind: "file", Target: string(sandbox.Redact([]byte(c.Path), secrets)), Rule: "its name holds the value of a granted secret"})
			continue
		}
		if c.After != nil && len(secrets) > 0 {
			if data, err := os.ReadFile(filepath.Join(work, filepath.FromSlash(c.Path))); err == nil && sandbox.Holds(data, secrets) {
				rec.denied = append(rec.denied, ledger.Denied{Verb: "write", Kind: "file", Target: c.Path, Rule: "holds the value of a granted secret"})
				continue
			}
		}
		clean = append(clean, c)
	}
	applied, denials, err := workspace.Apply(clean, work, r.workspace, r.pkg.Permissions, r.opts.StoreDir)
	if err != nil {
		return nil, fmt.Errorf("step %s: apply: %w", s.ID, err)
	}
	for _, d := range denials {
		rec.denied = append(rec.denied, r.deny(d))
	}
	for _, c := range applied {
		var before, after string
		if c.Before != nil {
			before = c.Before.Digest
		}
		if c.After != nil {
			after = c.After.Digest
		}
		link, err := r.mutation(s.ID, c.Path, before, after)
		if err != nil {
			return nil, err
		}
		rec.evidence = append(rec.evidence, link)
	}
	r.state["steps"].(map[string]any)[s.ID] = map[string]any{"exit": int64(res.ExitCode), "timed_out": res.TimedOut}
	if len(rec.denied) > 0 && rec.status == ledger.StepOK {
		rec.status = ledger.StepDenied
	}
	if err := r.record(rec); err != nil {
		return nil, err
	}
	return r.afterDenial(s, rec.denied), nil
}

// mutation records a change to a workspace file and stores the new
// content as an artifact.
func (r *runner) mutation(step, path, before, after string) (cas.Link, error) {
	at := r.now()
	data := map[string]any{"path": path, "before": before, "after": after}
	if after != "" {
		f, err := os.Open(filepath.Join(r.workspace, filepath.FromSlash(path)))
		if err == nil {
			c, _, err := cas.PutFile(r.ctx, r.st, f, nil)
			f.Close()
			if err != nil {
				return cas.Link{}, err
			}
			r.artifacts[path] = ledger.Artifact{Path: path, File: cas.Link{Cid: c}, Digest: after}
			data["file"] = c.String()
		}
	} else {
		delete(r.artifacts, path)
	}
	r.lastChange["file:"+path] = at
	r.used["write:file:"+path] = true
	return r.observeAt(step, evidence.KindMutation, "file:"+path, data, at)
}
