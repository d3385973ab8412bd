package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/haygent/hg/haygent/sandbox/initproc"
)

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
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/ca-certificates.conf",
	"/etc/pki/tls/certs", "/etc/pki/ca-trust",
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
		out = append(out, "landlock-fs:abi"+strconv.Itoa(min(c.abi, initproc.MaxLandlockABI)))
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
	url := "http://127.0.0.1:" + strconv.Itoa(initproc.BridgePort)
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

// Overlay is a directory a confined command sees at Target, holding
// Lower's files and whatever the command adds or changes, which goes to
// a layer of its own (see [Spec.Overlays]).
type Overlay struct {
	Lower, Target string
}

// overlayLayers makes, beside each overlay's Target, the upper and work
// directories of its layer, and returns the mounts for the init. A path
// the mount options cannot carry (',', ':' or '\') is refused.
func overlayLayers(ovs []Overlay) ([]initproc.Overlay, error) {
	var out []initproc.Overlay
	for _, o := range ovs {
		if !filepath.IsAbs(o.Lower) || !filepath.IsAbs(o.Target) {
			return nil, fmt.Errorf("%w: overlay paths must be absolute: %q, %q", ErrInvalidSpec, o.Lower, o.Target)
		}
		up, work := o.Target+".upper", o.Target+".work"
		for _, p := range []string{o.Lower, up, work, o.Target} {
			if strings.ContainsAny(p, ",:\\") {
				return nil, fmt.Errorf("%w: overlay path %q holds ',', ':' or '\\'", ErrInvalidSpec, p)
			}
		}
		for _, d := range []string{up, work, o.Target} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: overlay: %w", err)
			}
		}
		out = append(out, initproc.Overlay{Lower: o.Lower, Upper: up, Work: work, Target: o.Target})
	}
	return out, nil
}

// hideable returns the paths of s.Hide that can be hidden: those that hold
// neither s.Dir nor a Write path.
func hideable(s Spec) []string {
	var out []string
	for _, h := range existing(s.Hide) {
		ok := true
		for _, w := range append([]string{s.Dir}, s.Write...) {
			if w == h || strings.HasPrefix(w, h+string(filepath.Separator)) {
				ok = false
			}
		}
		if ok {
			out = append(out, h)
		}
	}
	return out
}
