package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultMaxOutput is the cap on captured stdout, and separately on
// stderr, when [Spec.MaxOutput] is zero.
const DefaultMaxOutput = 16 << 20

// PipeGrace is how long Run waits, after the command has exited and its
// process group has been killed, for the output pipes to close. Only a
// process that left the group can hold them open that long.
const PipeGrace = 2 * time.Second

// ErrNoIsolation is returned, wrapped with the reason, when
// [Spec.NoNetwork] is set, no network namespace can be created, and
// [Spec.AllowUnisolated] is not set.
var ErrNoIsolation = errors.New("sandbox: isolation unavailable")

// ErrInvalidSpec is returned, wrapped with the reason, for a [Spec] that
// cannot describe a run: empty argv, a missing or relative Dir, a bad
// environment entry, a negative limit.
var ErrInvalidSpec = errors.New("sandbox: invalid spec")

// Spec says what to run and under which limits. The zero value of every
// field except Argv and Dir is usable.
type Spec struct {
	// Argv is the exact argv, run without a shell. Argv[0] is resolved as
	// the package documentation says (Program lookup); it must not be
	// empty.
	Argv []string

	// Dir is the working directory, normally the step's scratch copy. It
	// must be an absolute path to an existing directory.
	Dir string

	// Env is the complete environment of the command: nothing is inherited
	// from the parent, and nil means an empty environment. Keys must be
	// non-empty and hold no '=' or NUL; values must hold no NUL. See
	// [DefaultEnv] for the usual base.
	Env map[string]string

	// Timeout is the wall-clock limit, counted from the start. At expiry
	// the command's whole process group is killed and the Result says
	// TimedOut. Zero means no limit other than ctx.
	Timeout time.Duration

	// NoNetwork runs the command in a new network namespace with only a
	// loopback interface, which is down.
	NoNetwork bool

	// AllowUnisolated lets Run go on without a network namespace when
	// NoNetwork is set and none can be created; [Result.Limitations] then
	// says so. Without it, Run fails with [ErrNoIsolation].
	AllowUnisolated bool

	// Stdin is the command's standard input. Empty means /dev/null.
	Stdin []byte

	// MaxOutput caps captured stdout, and separately stderr, in bytes;
	// zero means [DefaultMaxOutput]. Output past the cap is read and
	// dropped (the command is never blocked on a full pipe) and the
	// Result's truncation flag is set. The cap holds after redaction
	// too: a Result's Stdout and Stderr are never longer.
	MaxOutput int64

	// Confine runs the command confined, as the package documentation
	// says (Confinement): in new user, PID, mount, IPC, UTS and network
	// namespaces with a fresh /proc, and under Landlock, reading only
	// [SystemReadPaths], Read, Dir and Write, and writing only Dir and
	// Write. Its network is a namespace of its own whose only way out is
	// a proxy that asks NetCheck (nil: no way out). Where this cannot be
	// had in whole, Run fails with [ErrNoIsolation] unless
	// AllowUnisolated is set; then it runs with what can be had and
	// [Result.Limitations] says what was missing. NoNetwork is implied.
	Confine bool

	// Read and Write are absolute paths of hierarchies a confined
	// command may also read (and execute), and also write. Paths that do
	// not exist are skipped.
	Read, Write []string

	// Overlays, for a confined command, make each Target directory
	// (which must be under Dir or Write) show its Lower directory, with
	// what the command writes there going to an upper layer that is
	// thrown away with Target's parent: a cache it may read whole and
	// add to, without changing what later commands see. Where no mount
	// namespace can be had, Target starts empty instead, and
	// [Result.Limitations] says so.
	Overlays []Overlay

	// Hide are directories a confined command must not see even where
	// they lie under Read: the workspace it works on a copy of, the store
	// (their contents reach it only as the runtime gives them). A path
	// holding Dir or a Write path cannot be hidden, and
	// [Result.Limitations] says so.
	Hide []string

	// NetCheck, for a confined command, decides each connection it asks
	// its proxy for; nil means the command has no network at all.
	NetCheck NetCheck

	// Secrets are values, normally some of Env's, that must not appear in
	// the captured output: Run passes Stdout and Stderr through [Redact]
	// with them, cutting at the cap so that no partial value survives.
	Secrets []string
}

// Result records one run. Run fills what it got to: a command that never
// started has ExitCode -1 and zero Started and Finished.
type Result struct {
	// Argv is a copy of Spec.Argv.
	Argv []string
	// Path is the program Argv[0] resolved to, or "" if it was not found.
	Path string
	// ExitCode is the command's exit status, or -1 if it was killed by a
	// signal or never started.
	ExitCode int
	// Signal names the signal that killed the command, as the system
	// spells it ("killed" for SIGKILL), or "" if it exited by itself.
	Signal string
	// TimedOut reports that Spec.Timeout expired and the command was
	// killed for it.
	TimedOut bool
	// Stdout and Stderr are the captured output, redacted and capped;
	// never nil.
	Stdout, Stderr []byte
	// StdoutTruncated and StderrTruncated report that the command wrote
	// more than MaxOutput bytes to that stream, or that redaction made it
	// longer than that, and the rest was dropped.
	StdoutTruncated, StderrTruncated bool
	// Started is when the command was started; Finished is when it had
	// exited and its output had been collected.
	Started, Finished time.Time
	// Isolation lists what was in force, in this order: "scrubbed-env",
	// "new-session", "timeout", "netns", "userns".
	Isolation []string
	// NetDenials are the connections a confined command's proxy refused,
	// in the order asked.
	NetDenials []NetDenial
	// NetDenialsDropped counts refusals past the first [MaxNetDenials],
	// which are not listed.
	NetDenialsDropped int
	// Limitations lists, in words, protections that were asked for or
	// normally hold but were missing in this run: a network namespace
	// that could not be had (only with AllowUnisolated), or a process
	// that left the process group and held the output open.
	Limitations []string
}

// netnsMode is what Run consults for NoNetwork; tests replace it.
var netnsMode = probedMode

// Run runs s.Argv as [Spec] says and waits for it, and for its output, to
// end. It is safe for concurrent use.
//
// A non-zero exit or a timeout is reported in the Result, not as an error.
// The errors are: [ErrInvalidSpec]; an error wrapping [exec.ErrNotFound]
// and naming Argv[0]; [ErrNoIsolation]; a start failure; and ctx.Err() if
// ctx was done before the command ended, in which case the command's
// process group has been killed and the Result records the run up to then.
// The Result is never nil.
func Run(ctx context.Context, s Spec) (*Result, error) {
	res := &Result{Argv: slices.Clone(s.Argv), ExitCode: -1, Stdout: []byte{}, Stderr: []byte{}}
	env, err := s.check()
	if err != nil {
		return res, err
	}
	if res.Path, err = resolve(s.Argv[0], s.Env, s.Dir); err != nil {
		return res, err
	}
	res.Isolation = append(res.Isolation, "scrubbed-env")
	if groupKill {
		res.Isolation = append(res.Isolation, "new-session")
	}
	if s.Timeout > 0 {
		res.Isolation = append(res.Isolation, "timeout")
	}
	mode := nsNone
	var conf *confinement
	if s.Confine {
		c, reason := confineMode()
		missing := c.missing()
		if len(missing) > 0 && !s.AllowUnisolated {
			return res, fmt.Errorf("%w: %s (%s)", ErrNoIsolation, strings.Join(missing, "; "), reason)
		}
		for _, m := range missing {
			res.Limitations = append(res.Limitations, "unisolated: "+m)
		}
		res.Isolation = append(res.Isolation, c.isolation()...)
		if c.mode != nsNone || c.abi > 0 {
			conf = &c
		}
		if len(s.Overlays) > 0 && !c.hasNetns() {
			res.Limitations = append(res.Limitations, "no mount namespace for overlays: each started empty")
		}
		if s.NetCheck != nil && !c.hasNetns() {
			res.Limitations = append(res.Limitations, "network grants not enforced: the command ran with the host's network")
		}
	} else if s.NoNetwork {
		var reason string
		mode, reason = netnsMode()
		switch {
		case mode != nsNone:
			res.Isolation = append(res.Isolation, mode.isolation()...)
		case !s.AllowUnisolated:
			return res, fmt.Errorf("%w: %s", ErrNoIsolation, reason)
		default:
			res.Limitations = append(res.Limitations,
				"network namespace unavailable: "+reason+"; ran with host network")
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	limit := s.MaxOutput
	if limit == 0 {
		limit = DefaultMaxOutput
	}
	forms := secretForms(s.Secrets)
	slack := 0
	for _, f := range forms {
		slack = max(slack, len(f)-1)
	}
	stdout := &capture{keep: limit + int64(slack)}
	stderr := &capture{keep: limit + int64(slack)}

	var closers []*os.File // parent ends, closed on every path out
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	var (
		cmd      *exec.Cmd
		confined *confinedRun
		px       *proxy
	)
	if conf != nil {
		var bridge string
		if s.NetCheck != nil && conf.hasNetns() {
			if px, err = newProxy(s.NetCheck); err != nil {
				return res, fmt.Errorf("sandbox: network proxy: %w", err)
			}
			defer func() { res.NetDenials, res.NetDenialsDropped = px.close() }()
			bridge = px.sock
			res.Isolation = append(res.Isolation, "net-proxy")
			env = withProxyEnv(env)
		}
		if confined, err = startConfined(*conf, s, res.Path, env, bridge); err != nil {
			return res, err
		}
		closers = append(closers, confined.status)
		cmd = confined.cmd
	} else {
		cmd = &exec.Cmd{
			Path:        res.Path,
			Args:        slices.Clone(s.Argv),
			Dir:         s.Dir,
			Env:         env,
			SysProcAttr: sysProcAttr(mode),
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("sandbox: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return res, fmt.Errorf("sandbox: %w", err)
	}
	closers = append(closers, outR, errR)
	cmd.Stdout, cmd.Stderr = outW, errW
	childEnds := []*os.File{outW, errW}
	var inW *os.File
	if len(s.Stdin) > 0 {
		var inR *os.File
		if inR, inW, err = os.Pipe(); err != nil {
			outW.Close()
			errW.Close()
			return res, fmt.Errorf("sandbox: %w", err)
		}
		closers = append(closers, inW)
		childEnds = append(childEnds, inR)
		cmd.Stdin = inR
	}

	res.Started = time.Now()
	err = cmd.Start()
	for _, f := range childEnds {
		f.Close()
	}
	if confined != nil {
		confined.started()
	}
	if err != nil {
		res.Started = time.Time{}
		return res, fmt.Errorf("sandbox: start %s: %w", res.Path, err)
	}

	var readers sync.WaitGroup
	readers.Go(func() { io.Copy(stdout, outR) })
	readers.Go(func() { io.Copy(stderr, errR) })
	if inW != nil {
		// The write fails once nothing reads the pipe any more; inW is
		// also closed below, which ends a write that is still blocked.
		go func() {
			inW.Write(s.Stdin)
			inW.Close()
		}()
	}

	exited, reap := watch(cmd)
	var expired <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		expired = t.C
	}
	var ctxErr error
	select {
	case <-exited:
	case <-expired:
		res.TimedOut = true
		kill(cmd)
		<-exited
	case <-ctx.Done():
		ctxErr = ctx.Err()
		kill(cmd)
		<-exited
	}
	// Whatever the command left running in its group goes too.
	kill(cmd)
	waitErr := reap()
	if inW != nil {
		inW.Close()
	}

	collected := make(chan struct{})
	go func() {
		readers.Wait()
		close(collected)
	}()
	select {
	case <-collected:
	case <-time.After(PipeGrace):
		outR.Close()
		errR.Close()
		<-collected
		res.Limitations = append(res.Limitations, fmt.Sprintf(
			"a process outside the command's process group held its output open after it exited;"+
				" output was cut after %v and that process may still be running", PipeGrace))
	}
	res.Finished = time.Now()

	res.Stdout, res.StdoutTruncated = stdout.result(limit, forms)
	res.Stderr, res.StderrTruncated = stderr.result(limit, forms)
	ps := cmd.ProcessState
	if ps == nil {
		return res, fmt.Errorf("sandbox: wait %s: %w", res.Path, waitErr)
	}
	if confined != nil {
		cr, note, err := confined.done()
		if err != nil {
			return res, err
		}
		res.ExitCode, res.Signal = cr.code, cr.signal
		if note != "" && int64(len(res.Stderr)+len(note)) <= limit {
			res.Stderr = append(res.Stderr, note...)
		}
		return res, ctxErr
	}
	res.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(interface {
		Signaled() bool
		Signal() syscall.Signal
	}); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
	}
	return res, ctxErr
}

// check validates s and returns the environment as exec wants it, sorted.
func (s *Spec) check() ([]string, error) {
	bad := func(format string, args ...any) ([]string, error) {
		return nil, fmt.Errorf("%w: %s", ErrInvalidSpec, fmt.Sprintf(format, args...))
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return bad("empty argv")
	}
	for _, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return bad("argv element %q holds a NUL byte", a)
		}
	}
	if !filepath.IsAbs(s.Dir) {
		return bad("dir %q is not an absolute path", s.Dir)
	}
	if s.Confine {
		// A confined command's root holds its directories at their
		// paths: the host's root is never one of them.
		for _, p := range append([]string{s.Dir}, s.Write...) {
			if filepath.Clean(p) == "/" {
				return bad("a confined command cannot be given / to write")
			}
		}
	}
	if fi, err := os.Stat(s.Dir); err != nil {
		return bad("dir: %v", err)
	} else if !fi.IsDir() {
		return bad("dir %q is not a directory", s.Dir)
	}
	if s.Timeout < 0 {
		return bad("negative timeout %v", s.Timeout)
	}
	if s.MaxOutput < 0 {
		return bad("negative output cap %d", s.MaxOutput)
	}
	env := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return bad("environment key %q", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return bad("environment value of %s holds a NUL byte", k)
		}
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}

// capture keeps the first keep bytes written to it and counts the rest.
// Written to by one goroutine, read after it is done.
type capture struct {
	keep  int64
	buf   []byte
	total int64
}

func (c *capture) Write(p []byte) (int, error) {
	if room := c.keep - int64(len(c.buf)); room > 0 {
		c.buf = append(c.buf, p[:min(int64(len(p)), room)]...)
	}
	c.total += int64(len(p))
	return len(p), nil
}

// result returns the output, redacted and at most limit bytes long, and
// whether anything was cut. Redaction sees the whole buffer, which holds
// up to len(longest form)-1 bytes past limit, so a value that starts
// before limit is seen whole and replaced whole; no byte from past limit
// is kept. The marks can make the redacted text longer than the command's
// output, so it is cut at limit again.
func (c *capture) result(limit int64, forms [][]byte) ([]byte, bool) {
	cut := min(int64(len(c.buf)), limit)
	out := redactUpTo(c.buf, forms, int(cut))
	truncated := c.total > limit
	if int64(len(out)) > limit {
		out, truncated = out[:limit], true
	}
	if out == nil {
		out = []byte{}
	}
	return out, truncated
}

// resolve finds the program for name as the package documentation says.
func resolve(name string, env map[string]string, dir string) (string, error) {
	if strings.ContainsRune(name, '/') || strings.ContainsRune(name, filepath.Separator) {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("sandbox: program %q: %w", name, err)
		}
		return p, nil
	}
	pathList, ok := env["PATH"]
	if !ok {
		pathList = DefaultPath
	}
	for _, d := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("sandbox: program %q not in PATH %q: %w", name, pathList, exec.ErrNotFound)
}

// executable reports whether p is a file the command could exec; a
// missing file is [exec.ErrNotFound].
func executable(p string) error {
	_, err := exec.LookPath(p)
	if err == nil {
		return nil
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return exec.ErrNotFound
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}
