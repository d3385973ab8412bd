//go:build linux

package initproc

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// initMain is the init of a confined command: the first process of its
// namespaces. It reads its [Config] from descriptor 3, sets up a fresh
// /proc, the loopback and the bridge to the network proxy, restricts
// itself with Landlock (which the command inherits), runs the command with
// descriptors 0-2, and reports its [Status] on descriptor 4. It never
// writes to descriptors 0-2 itself.
func run() int {
	status := os.NewFile(4, "status")
	report := func(st Status) int {
		if status != nil {
			json.NewEncoder(status).Encode(st)
			status.Close()
		}
		return 0
	}
	fail := func(stage string, err error) int {
		return report(Status{Code: -1, Stage: stage, Err: err.Error()})
	}
	// Nothing the command runs may trace or read the init's memory, or
	// end it before it reports (only SIGKILL from outside ends it).
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTSTP,
		syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGPROF)
	// No descriptor the runner happened to inherit reaches the command.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	var cfg Config
	cf := os.NewFile(3, "config")
	if cf == nil {
		return fail("config", errors.New("no configuration descriptor"))
	}
	err := json.NewDecoder(cf).Decode(&cfg)
	cf.Close()
	if err != nil {
		return fail("config", err)
	}
	syscall.CloseOnExec(4)

	if cfg.Proc {
		// Mounts made here stay here, and /proc shows only this PID
		// namespace.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fail("make mounts private", err)
		}
		if cfg.Root != "" {
			if stage, err := buildRoot(cfg); err != nil {
				return fail(stage, err)
			}
		} else {
			if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
				return fail("mount /proc", err)
			}
			for _, o := range cfg.Overlays {
				if err := mountOverlay(o, o.Target); err != nil {
					return fail("mount overlay on "+o.Target, err)
				}
			}
		}
	}
	if cfg.Net {
		if err := loopbackUp(); err != nil {
			return fail("loopback up", err)
		}
	}
	var bridge net.Listener
	if cfg.Bridge != "" {
		if bridge, err = net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(BridgePort)); err != nil {
			return fail("network bridge", err)
		}
		go serveBridge(bridge, cfg.Bridge)
	}
	if cfg.Landlock > 0 {
		if err := restrict(cfg); err != nil {
			return fail("landlock", err)
		}
	}

	cmd := &exec.Cmd{
		Path: cfg.Path, Args: cfg.Argv, Dir: cfg.Dir, Env: cfg.Env,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
	}
	if stage, err := startPowerless(cmd); err != nil {
		return fail(stage, err)
	}
	cmd.Wait()
	st := Status{Code: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Signal = ws.Signal().String()
	}
	return report(st)
}

// landlockConfigs are go-landlock's configurations by ABI.
var landlockConfigs = []landlock.Config{
	landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7,
}

// restrict applies cfg's file system rules to every thread of this
// process, and, from ABI 6 on, scopes signals and abstract Unix sockets to
// the domain.
func restrict(cfg Config) error {
	abi := min(cfg.Landlock, MaxLandlockABI)
	c := landlockConfigs[abi-1]
	var rules []landlock.Rule
	for _, p := range cfg.Read {
		if isDir(p) {
			rules = append(rules, landlock.RODirs(p))
		} else {
			rules = append(rules, landlock.ROFiles(p))
		}
	}
	for _, p := range cfg.Write {
		if isDir(p) {
			rules = append(rules, landlock.RWDirs(p).WithRefer())
		} else {
			rules = append(rules, landlock.RWFiles(p))
		}
	}
	for _, p := range cfg.Devices {
		if abi >= 5 {
			rules = append(rules, landlock.RWFiles(p).WithIoctlDev())
		} else {
			rules = append(rules, landlock.RWFiles(p))
		}
	}
	if err := c.RestrictPaths(rules...); err != nil {
		return err
	}
	if abi >= 6 {
		return c.RestrictScoped()
	}
	return nil
}

// loopbackUp brings up the loopback interface of this network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// serveBridge joins each connection on l to a new connection to the Unix
// socket at sock, until l fails.
func serveBridge(l net.Listener, sock string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer u.Close()
			Join(c, u)
		}()
	}
}

// isDir reports whether p is a directory, following symbolic links.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
