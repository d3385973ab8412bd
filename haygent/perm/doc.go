// Package perm parses and enforces the permissions of a Haygent: grants,
// deny entries and named commands, deny by default.
//
// # permissions.json
//
// A Haygent package holds one permissions.json, an object with three
// optional keys and nothing else:
//
//	{
//	  "grants":   ["read:file:project/**", "write:file:generated/**",
//	               "run:command:go-test", "network:none", "secret:none",
//	               "publish:none", "spend:none"],
//	  "deny":     ["read:file:project/.env", "read:file:**/*.pem"],
//	  "commands": {"go-test": ["go", "test", "-json", "./..."]}
//	}
//
//	grants    array of entry strings: what the Haygent may do
//	deny      array of entry strings: what it may not, whatever grants say
//	commands  object: command name → exact argv, a non-empty array of
//	          strings; the runtime executes it without a shell
//
// [Parse] refuses unknown keys (keys are case-sensitive), duplicate keys at
// any depth, values of the wrong type and trailing data. A missing key is
// an empty list; a Haygent with no grants may do nothing.
//
// # Entries
//
//	read:file:GLOB         read files whose path matches GLOB
//	write:file:GLOB        create, modify or delete files matching GLOB
//	run:command:NAME       run commands[NAME]; NAME is [A-Za-z0-9][A-Za-z0-9._-]*
//	network:none           no network (also the default)
//	network:HOST[:PORT]    connect to HOST (any port) or HOST:PORT; [IPv6]:PORT
//	secret:none            no secrets (also the default)
//	secret:NAME            receive the secret NAME ([A-Za-z_][A-Za-z0-9_]*)
//	publish:none           publish nothing (also the default)
//	publish:TARGET         publish to TARGET (printable, no white space)
//	spend:none             spend nothing (also the default)
//	spend:AMOUNT           spend at most AMOUNT per operation, AMOUNT being
//	                       DIGITS[.DIGITS][UNIT]: "5", "2.50USD", "1000tokens"
//
// Network, secret and publish grants may repeat with different values; spend
// may repeat with different units. A "none" grant excludes every other grant
// of its verb: both in one file is an error. Host names are exact (no
// wildcards) and compared in lower case.
//
// Deny entries use the same grammar, except that "none" and spend cannot be
// denied. A deny entry decides an operation it matches, however many grants
// match too: deny read:file:**/*.pem keeps every .pem file unread under any
// read grant; deny network:example.com closes every port of that host.
//
// Errors name the entry and the reason, as [*EntryError]: an unknown verb or
// kind, a bad pattern, host, port, name or amount, a duplicate, "none" next
// to another grant of its verb, a run grant without its command, and a
// command nothing names.
//
// # Globs
//
// File entries and file operations use workspace-relative, slash-separated
// paths. [CleanPath] refuses an empty, absolute, backslashed or NUL-holding
// path, and any path with a ".." segment, even one cleaning would remove;
// what it accepts it cleans with path.Clean, and "." is the workspace root.
// Patterns ([ParseGlob]) obey the same rules and add:
//
//	**   a whole segment: any number of segments, including none
//	*    any run of characters within one segment
//	?    one character within one segment
//
// "project/**" matches "project" itself and everything below it; "*.go"
// matches "a.go" and not "x/a.go"; "**/*.pem" matches "k.pem" and
// "a/b/k.pem". A leading "." is not special: "*" matches ".env". There are
// no character classes and no escapes.
//
// # Decisions
//
// [Set.Check] decides one [Op]: a matching deny entry denies; else a
// matching grant allows; else the "none" grant of the op's verb, if
// written, denies; else [RuleDefault] denies. [Decision.Rule] names what
// decided, so the runtime can record it. Deleting a file is the op
// delete:file:PATH and is decided by write:file entries.
//
// [Set.Snapshot] lists the set in a canonical form for hashing;
// [Set.Widens] tells what a proposed set would permit that the current one
// does not.
package perm
