package initproc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// buildRoot makes cfg.Root the root of this mount namespace, holding only
// what the command may use (see [Config.Root]). It returns the stage that
// failed.
func buildRoot(cfg Config) (string, error) {
	root := cfg.Root
	// A small tmpfs: Landlock gives no write to it, and without Landlock
	// what the command writes there goes with the namespace.
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return "mount the root", err
	}
	type bind struct {
		path string
		rw   bool
	}
	var binds []bind
	for _, p := range cfg.Read {
		if p != "/proc" { // a fresh one is mounted below
			binds = append(binds, bind{p, false})
		}
	}
	for _, p := range cfg.Write {
		binds = append(binds, bind{p, true})
	}
	for _, p := range cfg.Devices {
		binds = append(binds, bind{p, true})
	}
	if cfg.Bridge != "" {
		binds = append(binds, bind{filepath.Dir(cfg.Bridge), true})
	}
	// Parents before what lies under them.
	slices.SortStableFunc(binds, func(a, b bind) int { return strings.Count(a.path, "/") - strings.Count(b.path, "/") })
	for _, b := range binds {
		if err := bindInto(root, b.path, b.rw); err != nil {
			return "bind " + b.path, err
		}
	}
	for _, h := range cfg.Hide {
		t := filepath.Join(root, h)
		if fi, err := os.Stat(t); err != nil || !fi.IsDir() {
			continue // not under anything bound, or not a directory
		}
		if err := unix.Mount("tmpfs", t, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0555,size=4k"); err != nil {
			return "hide " + h, err
		}
	}
	for _, o := range cfg.Overlays {
		if err := mountOverlay(o, filepath.Join(root, o.Target)); err != nil {
			return "mount overlay on " + o.Target, err
		}
	}
	proc := filepath.Join(root, "proc")
	if err := os.MkdirAll(proc, 0o555); err != nil {
		return "mount /proc", err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "mount /proc", err
	}
	if err := os.Chdir(root); err != nil {
		return "enter the root", err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return "pivot the root", err
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return "drop the host's root", err
	}
	if err := os.Chdir("/"); err != nil {
		return "enter the root", err
	}
	return "", nil
}

// bindInto binds the host's path p at the same path under root,
// read-only unless rw. A path that does not exist is skipped.
func bindInto(root, p string, rw bool) error {
	fi, err := os.Stat(p)
	if err != nil {
		return nil
	}
	t := filepath.Join(root, p)
	if fi.IsDir() {
		if err := os.MkdirAll(t, 0o755); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(t), 0o755); err != nil {
			return err
		}
		if f, err := os.OpenFile(t, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
		} else if !os.IsExist(err) {
			return err
		}
	}
	if err := unix.Mount(p, t, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if rw {
		return nil
	}
	// A bind mount keeps the flags of the mount it comes from, which a
	// user namespace may not clear; read-only is added to them.
	var sfs unix.Statfs_t
	if err := unix.Statfs(t, &sfs); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for st, ms := range map[int64]uintptr{
		unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC,
		unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME,
	} {
		if sfs.Flags&st != 0 {
			flags |= ms
		}
	}
	return unix.Mount("", t, "", flags, "")
}

// mountOverlay mounts o at target.
func mountOverlay(o Overlay, target string) error {
	opts := "lowerdir=" + o.Lower + ",upperdir=" + o.Upper + ",workdir=" + o.Work
	return unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts)
}
