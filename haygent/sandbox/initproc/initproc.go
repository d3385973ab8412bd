// Package initproc is the init of a confined command: the first process in
// the command's namespaces, which sets up its /proc, loopback, network
// bridge and Landlock domain, runs the command and reports how it ended.
//
// The sandbox package starts it by executing its own program again, with
// argv[0] set to [Arg0]. This package's init function recognizes that and
// runs the init there and then, before the program's other packages are
// initialized (Go initializes a package as soon as its imports are, in
// import path order, and this package imports little), and exits. Every
// program that links the sandbox package therefore serves as the init,
// with nothing to call from main.
package initproc

import "os"

// Arg0 is the argv[0] under which a program runs as the init.
const Arg0 = "hg-sandbox-init"

// BridgePort is the port on 127.0.0.1, inside a confined command's
// network namespace, where the init bridges to the network proxy.
const BridgePort = 3128

// MaxLandlockABI is the highest Landlock ABI that confinement uses; a
// newer kernel is used at this ABI.
const MaxLandlockABI = 7

// Config is what the sandbox tells the init, as JSON on file descriptor 3.
type Config struct {
	Path string   // the resolved program
	Argv []string // its argv
	Dir  string
	Env  []string

	// Landlock is the Landlock ABI to enforce with, 0 for none. Read and
	// Write are the hierarchies (or files) the command may read (and
	// execute), and also write; Devices are device files it may read
	// and write.
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

	// Overlays are mounted (with Proc only) before Landlock applies.
	Overlays []Overlay

	// Root, with Proc, is an empty directory where the init builds the
	// command's file system and makes it the root: an empty tmpfs holding
	// only Read (read-only), Write and Devices, the Bridge's directory
	// and a fresh /proc, each at its own path. Nothing else of the host
	// (its sockets under /run, a workspace under /usr) is there to reach.
	// Hide are paths inside those that get an empty read-only tmpfs over
	// them (the workspace and the store, should they lie under Read).
	Root string
	Hide []string
}

// Overlay makes Target show Lower with the writes going to Upper: a
// directory the command may read and change without changing Lower.
// Upper and Work are empty directories on one file system.
type Overlay struct {
	Lower, Upper, Work, Target string
}

// Status is what the init reports, as JSON on file descriptor 4, once
// the command has ended or could not be started.
type Status struct {
	Code   int    // the command's exit status, -1 if killed or not started
	Signal string // the signal that killed it
	Stage  string // where setting up failed, if Err is set
	Err    string
}

func init() {
	if len(os.Args) > 0 && os.Args[0] == Arg0 {
		os.Exit(run())
	}
}
