//go:build linux

package sandbox

import (
	"bytes"
	"github.com/haygent/hg/haygent/sandbox/initproc"

	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

var confineProbe struct {
	once   sync.Once
	c      confinement
	reason string
}

// confineMode is what Run consults for Confine; tests replace it.
var confineMode = probedConfinement

// Confinement reports what a confined run gets on this machine: ok is
// true when it is complete (namespaces and Landlock), and what lists it
// as [Result.Isolation] would, or says what is missing and why.
func Confinement() (ok bool, what string) {
	c, reason := confineMode()
	if len(c.missing()) > 0 {
		return false, reason
	}
	return true, strings.Join(c.isolation(), ", ")
}

func probedConfinement() (confinement, string) {
	confineProbe.once.Do(func() { confineProbe.c, confineProbe.reason = probeConfinement() })
	return confineProbe.c, confineProbe.reason
}

// probeConfinement finds the best confinement that works here, by
// starting `true` under each.
func probeConfinement() (confinement, string) {
	var reasons []string
	abi, err := ll.LandlockGetABIVersion()
	if err != nil || abi < 1 {
		abi = 0
		reasons = append(reasons, fmt.Sprintf("Landlock unavailable (%v)", err))
	}
	path, err := resolve("true", nil, "/")
	if err != nil {
		return confinement{}, "cannot probe: " + err.Error()
	}
	dir, err := os.MkdirTemp("", "hg-probe-*")
	if err != nil {
		return confinement{}, "cannot probe: " + err.Error()
	}
	defer os.RemoveAll(dir)
	for _, m := range []nsMode{nsUserConfined, nsConfined, nsNone} {
		c := confinement{mode: m, abi: abi}
		res, err := runConfined(c, Spec{Argv: []string{"true"}, Dir: dir}, path, nil, nil, nil)
		if err == nil && res.code == 0 {
			return c, strings.Join(reasons, "; ")
		}
		if err == nil {
			err = fmt.Errorf("exit %d", res.code)
		}
		if m != nsNone {
			reasons = append(reasons, fmt.Sprintf("%v: %v", m, err))
		}
	}
	return confinement{}, strings.Join(reasons, "; ")
}

// confinedRun is a confined command in progress.
type confinedRun struct {
	cmd    *exec.Cmd
	status *os.File // the read end of the init's status pipe
	config []byte
	cfgW   *os.File
	root   string // the empty directory the init built the root in, or ""
}

// confinedResult is what the init reported.
type confinedResult struct {
	code   int
	signal string
}

// startConfined builds the command that starts the init of a confined
// run of path under c. The caller sets its output and input, starts it
// and calls done once it has exited.
func startConfined(c confinement, s Spec, path string, env []string, bridge string) (*confinedRun, error) {
	cfg := initproc.Config{
		Path: path, Argv: s.Argv, Dir: s.Dir, Env: env,
		Proc:   c.mode == nsUserConfined || c.mode == nsConfined,
		Net:    c.mode == nsUserConfined || c.mode == nsConfined,
		Bridge: bridge,
	}
	if c.abi > 0 {
		cfg.Landlock = c.abi
		read := append([]string{}, SystemReadPaths...)
		if cfg.Proc {
			read = append(read, "/proc") // a fresh one, of this PID namespace alone
		}
		read = append(read, s.Read...)
		cfg.Read = existing(read)
		cfg.Write = existing(append([]string{s.Dir}, s.Write...))
		cfg.Devices = existing(SystemDevices)
	}
	if cfg.Proc {
		ovs, err := overlayLayers(s.Overlays)
		if err != nil {
			return nil, err
		}
		cfg.Overlays = ovs
		if cfg.Root, err = os.MkdirTemp("", "hg-root-*"); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		cfg.Hide = hideable(s)
		if c.abi == 0 {
			// Without Landlock the root holds the same paths.
			read := append([]string{}, SystemReadPaths...)
			cfg.Read = existing(append(read, s.Read...))
			cfg.Write = existing(append([]string{s.Dir}, s.Write...))
			cfg.Devices = existing(SystemDevices)
		}
	} else {
		for _, o := range s.Overlays {
			if err := os.MkdirAll(o.Target, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: %w", err)
			}
		}
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		cfgW.Close()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	attr := sysProcAttr(c.mode)
	attr.Pdeathsig = syscall.SIGKILL
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{initproc.Arg0},
		Env:         []string{},
		Dir:         "/",
		ExtraFiles:  []*os.File{cfgR, stW},
		SysProcAttr: attr,
	}
	return &confinedRun{cmd: cmd, status: stR, config: data, cfgW: cfgW, root: cfg.Root}, nil
}

// started closes the child's ends of the pipes and sends the
// configuration; call it right after cmd.Start, whether or not it
// succeeded.
func (r *confinedRun) started() {
	for _, f := range r.cmd.ExtraFiles {
		f.Close()
	}
	go func() {
		r.cfgW.Write(r.config)
		r.cfgW.Close()
	}()
}

// done reads what the init reported, after it has exited. A command the
// init could not start is reported as exit 126, with why on stderr (note);
// a failure to set up the confinement is an error.
func (r *confinedRun) done() (res confinedResult, note string, err error) {
	defer r.status.Close()
	if r.root != "" {
		os.Remove(r.root) // empty here: the init's mounts were its own
	}
	if ps := r.cmd.ProcessState; ps != nil && !ps.Success() {
		// An init that did not end by itself, with 0, reported nothing
		// to trust.
		sig := "killed"
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = ws.Signal().String()
		}
		return confinedResult{code: -1, signal: sig}, "", nil
	}
	data, _ := io.ReadAll(r.status)
	if len(data) == 0 {
		// The init was killed (time limit, cancellation) before it
		// reported: the command went with it.
		return confinedResult{code: -1, signal: "killed"}, "", nil
	}
	var st initproc.Status
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || dec.More() {
		// Only the init writes there; a status it did not write is the
		// step's doing, and says nothing of how the command ended.
		return confinedResult{code: -1}, "hg sandbox: the command's status was tampered with\n", nil
	}
	switch {
	case st.Err == "":
		return confinedResult{code: st.Code, signal: st.Signal}, "", nil
	case st.Stage == "start":
		return confinedResult{code: 126}, "hg sandbox: cannot start the command: " + st.Err + "\n", nil
	default:
		return confinedResult{code: -1}, "", fmt.Errorf("sandbox: confinement: %s: %s", st.Stage, st.Err)
	}
}

// runConfined runs s under c with no output captured; the probe uses it.
func runConfined(c confinement, s Spec, path string, env []string, stdout, stderr io.Writer) (confinedResult, error) {
	r, err := startConfined(c, s, path, env, "")
	if err != nil {
		return confinedResult{}, err
	}
	r.cmd.Stdout, r.cmd.Stderr = stdout, stderr
	err = r.cmd.Start()
	r.started()
	if err != nil {
		r.status.Close()
		return confinedResult{}, err
	}
	r.cmd.Wait()
	res, _, err := r.done()
	return res, err
}
