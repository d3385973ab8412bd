// Package sandbox runs the one command a Haygent exec step is granted: the
// exact argv, no shell, in a scratch directory, with an environment built
// from nothing, a wall-clock limit, captured and capped output, and,
// confined ([Spec.Confine]), under Landlock in namespaces of its own whose
// only way out is an allowlisting proxy.
//
// [Run] is the whole interface. It never decides policy: the caller (the
// runtime) says what to run, where, with which environment and limits; Run
// does it and returns a [Result] that records what happened and which
// isolation was actually in force, so the record can be stored as evidence.
//
// # Errors and results
//
// A command that runs and exits non-zero, or is killed at its time limit,
// is not an error: the [Result] carries the exit code, the signal and
// TimedOut. Run returns an error only when the command could not be run as
// asked: an invalid [Spec] ([ErrInvalidSpec]), a program that cannot be
// found (wrapping [exec.ErrNotFound]), network isolation that cannot be had
// ([ErrNoIsolation]), a failed start, or a cancelled context (ctx.Err(),
// after the command was killed). Run always returns a non-nil *Result, even
// with an error, so the attempt can be recorded: ExitCode is -1 when the
// command never started.
//
// # Program lookup
//
// Argv[0] is resolved before anything starts, against the PATH in
// [Spec.Env] (or [DefaultPath] if Env has no PATH), never against the
// parent's PATH. Relative PATH entries are skipped, so a program in the
// scratch directory is never picked up by name; a name containing a slash
// is taken as a path, relative to [Spec.Dir] if not absolute. The resolved
// path is recorded in [Result.Path]; Argv is passed to the program as
// given.
//
// # Environment
//
// [Spec.Env] is the complete environment: nothing is inherited from the
// parent, and a nil Env means an empty one. [DefaultEnv] builds the usual
// base for a step:
//
//	PATH         /usr/local/bin:/usr/bin:/bin, with the directory of the
//	             parent's own `go` in front when the parent has one, so
//	             that `go test` steps use the same toolchain
//	LANG         C.UTF-8
//	GOTOOLCHAIN  local: never download another toolchain
//	GOPROXY      off: never download modules; only the module cache is read
//
// DefaultEnv does not know the step's directories, so it sets no HOME,
// TMPDIR, GOCACHE, GOMODCACHE or GOPATH; the caller passes them in extra.
// The runtime should pass:
//
//	GOCACHE      a build cache; go's cache is safe for concurrent use,
//	             so steps can share one, but a step can write into it, so
//	             steps that must not influence each other need their own
//	             (or a copy); without GOCACHE or HOME, `go build` and
//	             `go test` refuse to run
//	GOMODCACHE   a module cache holding the project's dependencies, which
//	             go only reads since GOPROXY is off (needed only for
//	             modules with dependencies)
//	HOME         a per-step directory outside the scratch copy: tools write
//	             dotfiles under HOME (go itself keeps its telemetry
//	             counters in HOME/.config/go/telemetry), and these should
//	             not show up among the step's outputs. With no HOME at all,
//	             go still works and writes no telemetry.
//	TMPDIR       likewise a per-step directory outside the scratch copy
//	             (go test builds in TMPDIR); without it programs use /tmp
//
// # Process lifetime
//
// The command starts as the leader of a new session and process group. At
// the time limit, on cancellation of ctx, and also when the command exits
// by itself, Run sends SIGKILL to the whole group, so nothing the command
// started in the background outlives the step. On Linux the group is
// killed before the leader is reaped, while its id cannot yet be reused.
//
// A process can still leave the group (setsid, setpgid, a job-control
// shell). If such a process keeps the output pipes open after the command
// has exited, Run waits [PipeGrace] for them, then closes its ends, keeps
// what was read, and says so in [Result.Limitations]; that process is not
// killed. Only a PID namespace or a cgroup would close this gap.
//
// # Confinement
//
// With [Spec.Confine] on Linux, Run starts the program itself again as the
// init of the command (package initproc), in new user, PID, mount, IPC, UTS
// and network namespaces. The init mounts a fresh /proc, brings the
// namespace's loopback up, restricts itself and so the command with
// Landlock to reading [SystemReadPaths], [Spec.Read], [Spec.Dir] and
// [Spec.Write], and writing only Dir and Write, starts the command and
// reports how it ended. With [Spec.NetCheck], a proxy on a Unix socket
// outside the namespace, bridged to 127.0.0.1:[initproc.BridgePort] inside
// it and named in HTTP_PROXY and HTTPS_PROXY, connects the command to the
// HOST:PORT pairs NetCheck allows and records the rest in
// [Result.NetDenials]. Killing the init at the time limit ends every
// process in the namespace. [Confinement] says what this machine gives;
// where it is not the whole, Run fails with [ErrNoIsolation] unless
// [Spec.AllowUnisolated] is set, and then [Result.Limitations] names each
// missing part. [Result.Isolation] names each part in force: "userns",
// "pidns", "mntns", "procfs", "netns", "ipcns", "utsns",
// "landlock-fs:abiN", "landlock-scope", "net-proxy".
//
// # Network isolation without confinement
//
// With [Spec.NoNetwork] on Linux the command runs in a new network
// namespace, which holds only a loopback interface that is down and has no
// routes: every connect, to the internet or to the host's 127.0.0.1, fails,
// and abstract Unix sockets of the host are out of reach too. Unix sockets
// bound to paths in the file system are not isolated by a network
// namespace and stay reachable if the command can open the path.
//
// Run prefers a network namespace inside a new user namespace that maps the
// current uid and gid to themselves: it needs no privilege where
// unprivileged user namespaces are allowed, and even when hg runs as root
// the command then holds no capability over the host's network namespace,
// so it cannot enter it again with setns. Where user namespaces are not
// allowed but the process may create a network namespace (root), Run
// creates the network namespace alone. [Available] probes once which works.
//
// When neither works, Run fails with [ErrNoIsolation], unless
// [Spec.AllowUnisolated] is set: then it runs the command with the host's
// network and records that in [Result.Limitations]. [Result.Isolation]
// lists what was in force: "scrubbed-env", "new-session", "timeout",
// "netns", "userns".
//
// # Secrets
//
// The runtime passes granted secret values inside Env. Listed in
// [Spec.Secrets], they are removed from the captured output before Run
// returns it, with [Redact], which also catches the hex, base64 and
// percent-encoded forms of each value. Redaction guards against a program
// printing a secret by accident; it cannot stop a program that means to
// leak one (printed backwards, one character per line, encrypted).
//
// # Platforms
//
// Everything above holds on Linux. On other systems the environment, time
// limit, output capture and redaction work the same, but the command is
// not put in a new process group (only the command itself is killed), and
// NoNetwork fails with [ErrNoIsolation] unless AllowUnisolated is set.
package sandbox
