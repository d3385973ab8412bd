package sandbox

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// initArg0 is the argv[0] under which the program re-executes itself as
// the init of a confined command (see [Init]).
const initArg0 = "hg-sandbox-init"

// initReady records that the program called [Init] at start, so that
// re-executing it as the init of a confined command is safe. It is set
// once, by main or TestMain, before any Run.
var initReady atomic.Bool

// Init must be called first thing in main (and in TestMain of every test
// binary that runs confined commands). In the program started as the init
// of a confined command it sets up the confinement, runs the command and
// exits, never returning; in every other case it returns at once and
// enables confined runs ([Spec.Confine]).
func Init() {
	if len(os.Args) > 0 && os.Args[0] == initArg0 {
		os.Exit(initMain())
	}
	initReady.Store(true)
}

// initConfig is what Run tells the init of a confined command, as JSON on
// file descriptor 3.
type initConfig struct {
	Path string   // the resolved program
	Argv []string // its argv
	Dir  string
	Env  []string

	// Landlock is the Landlock ABI to enforce with, 0 for none. Read and
	// Write are the hierarchies the command may read (and execute), and
	// also write; Devices are device files it may read and write.
	Landlock int
	Read     []string
	Write    []string
	Devices  []string

	// Proc says the init is in new PID and mount namespaces and mounts a
	// fresh /proc; Net says it is in a new network namespace and brings
	// its loopback up.
	Proc bool
	Net  bool

	// Bridge, if set, is a Unix socket that the init serves on
	// 127.0.0.1:[BridgePort] inside the network namespace: each TCP
	// connection there is joined to a new connection to Bridge.
	Bridge string
}

// initStatus is what the init reports, as JSON on file descriptor 4,
// once the command has ended or could not be started.
type initStatus struct {
	Code   int    // the command's exit status, -1 if killed or not started
	Signal string // the signal that killed it
	Stage  string // where setting up failed, if Err is set
	Err    string
}

// BridgePort is the port on 127.0.0.1, inside a confined command's
// network namespace, where its network proxy is reached (HTTP_PROXY and
// HTTPS_PROXY name it).
const BridgePort = 3128

// SystemReadPaths are the hierarchies every confined command may read and
// execute, besides [Spec.Read]: the system's programs and libraries, and
// the files of /etc that name resolution, certificates, users and the
// dynamic linker need. Paths missing on a system are skipped.
var SystemReadPaths = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/alternatives",
	"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf", "/etc/gai.conf",
	"/etc/services", "/etc/protocols",
	"/etc/passwd", "/etc/group",
	"/etc/localtime", "/etc/timezone",
	"/etc/ssl", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki",
	"/etc/mime.types", "/etc/os-release",
	"/dev/zero", "/dev/random", "/dev/urandom",
}

// SystemDevices are the device files every confined command may read and
// write.
var SystemDevices = []string{"/dev/null", "/dev/full"}

// existing returns the absolute, cleaned paths of ps that exist.
func existing(ps []string) []string {
	var out []string
	for _, p := range ps {
		if p == "" || !filepath.IsAbs(p) {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			out = append(out, filepath.Clean(p))
		}
	}
	return out
}

// MaxLandlockABI is the highest Landlock ABI that confinement uses; a
// newer kernel is used at this ABI.
const MaxLandlockABI = 7

// confinement is what a confined run gets on this machine: the namespaces
// of mode, and Landlock at abi (0: none).
type confinement struct {
	mode nsMode
	abi  int
}

// isolation names what c puts in force, in the order [Result.Isolation]
// lists it.
func (c confinement) isolation() []string {
	var out []string
	out = append(out, c.mode.isolation()...)
	if c.abi > 0 {
		out = append(out, "landlock-fs:abi"+strconv.Itoa(min(c.abi, MaxLandlockABI)))
		if c.abi >= 6 {
			out = append(out, "landlock-scope")
		}
	}
	return out
}

// complete reports whether c is the whole confinement; missing lists, in
// words, what is not.
func (c confinement) missing() []string {
	var m []string
	if c.mode != nsUserConfined && c.mode != nsConfined {
		m = append(m, "no PID, mount and network namespaces: the command sees the host's processes and network")
	}
	if c.abi == 0 {
		m = append(m, "no Landlock: the command can read and write every file the runner can")
	}
	return m
}

// hasNetns reports whether c gives the command a network namespace.
func (c confinement) hasNetns() bool {
	return c.mode == nsConfined || c.mode == nsUserConfined
}

// withProxyEnv adds to env (sorted KEY=VALUE entries) the variables that
// send HTTP and HTTPS through the bridge to the network proxy, replacing
// any the caller set.
func withProxyEnv(env []string) []string {
	url := "http://127.0.0.1:" + strconv.Itoa(BridgePort)
	set := map[string]bool{}
	var out []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		set[k] = true
		out = append(out, k+"="+url)
	}
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		set[k] = true
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !set[k] {
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}
