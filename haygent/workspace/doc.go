// Package workspace gives the steps of a Haygent their files: checked
// access to a workspace, a scratch copy to run in, the diff of what a step
// changed there, and the copy back of the changes the grants allow.
//
// # Paths and symbolic links
//
// Every path is workspace-relative and slash-separated, checked and
// cleaned by [perm.CleanPath]: absolute paths, ".." segments, backslashes
// and NUL bytes are refused. Every file operation goes through an
// [os.Root], so nothing outside the directory is ever reached, and on top
// of that this package never follows a symbolic link at all, not even one
// that stays inside: it walks each path a directory at a time, with Lstat,
// and checks that what it opened is what it looked at. A link inside the
// workspace could otherwise lead a read grant on one path to a file the
// grants refuse.
//
// # Workspace
//
// [Workspace] serves reads, writes, removals and listings to a running
// step, each checked against a [perm.Set]. A refused operation returns a
// [*perm.DeniedError] and is recorded in [Workspace.Denials] with the rule
// that refused it, for the runtime to turn into evidence.
//
// # Scratch, Diff, Apply
//
// A step runs in a scratch directory, not in the workspace:
//
//	m, err := workspace.Scratch(src, set, tmp, store)   // copy what set may read
//	... run the step in tmp ...
//	ch, err := workspace.Diff(m, tmp)                   // what it created, modified, deleted
//	done, denied, err := workspace.Apply(ch, tmp, src, set, store)
//
// [Scratch] copies only the regular files the read grants allow and
// records each one's sha256, size and permission bits in a [Manifest].
// Symbolic links are never copied (they are listed in [Manifest.Skipped]
// when their path is readable), so a step never sees a link it did not
// make. [Diff] compares the scratch directory with the manifest and lists
// [Changes]: creations, modifications, deletions, and every symbolic link
// or special file, with its target, never followed. [Apply] makes in the
// workspace the changes the write grants allow, each file written
// atomically, after checking that the workspace still holds what was
// copied; it denies every other change, and always denies creating a
// symbolic link or special file.
//
// Digests are lower-case hex sha256 strings, the before and after of each
// change, ready to be recorded as evidence.
//
// # hg stores
//
// A workspace may hold an hg store: 'hg init' in a project makes
// .haygent/ there, with the runner's signing key and the keys the store
// trusts. No step sees or changes a store, whatever its grants: [Scratch]
// copies none, [Workspace] refuses every operation inside one, and
// [Apply] denies every change to one, with [RuleStore]. A store is any
// directory named [StoreDirName] at any depth, and any store directory
// the caller names (Scratch, Apply and Open take their paths; see
// [NewFence]), known by its path and by its identity. [Diff] lists the
// changes a step made in such a path, so that Apply denies them and the
// denials are recorded.
//
// # Limits
//
// Hard links are files like any other: a hard link inside the workspace to
// a file the grants refuse is read through its permitted name. Directories
// are not tracked: an empty directory a step makes is not a change, and
// Apply makes directories only to hold files. Apply checks the workspace
// before it writes, not while it writes: a concurrent change to a file in
// between is overwritten.
package workspace
