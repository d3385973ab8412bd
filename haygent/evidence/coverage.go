package evidence

import "slices"

// Evidence kinds.
const (
	KindExit       = "exit"        // a process's exit status
	KindTestReport = "test_report" // a TestReport parsed from a test tool's output
	KindDigest     = "digest"      // bytes and the hash they have
	KindFile       = "file"        // a file observed at a path
	KindApproval   = "approval"    // a person's approval of a subject
	KindRead       = "read"        // bytes the runtime read for a step
	KindMutation   = "mutation"    // a change the runtime made
	KindHTTP       = "http"        // an HTTP exchange the runtime made
)

// Coverage says what one kind of evidence establishes and, as plainly,
// what it does not. It is written for the person reading a gate's receipt:
// a PASS is worth exactly the Establishes lines of the evidence it judged.
type Coverage struct {
	Establishes      []string
	DoesNotEstablish []string
}

// Data returns the coverage as a CEL gate or a receipt holds it:
// {"establishes": []any, "does_not_establish": []any}, of strings.
func (c Coverage) Data() map[string]any {
	conv := func(s []string) []any {
		out := make([]any, len(s))
		for i, v := range s {
			out[i] = v
		}
		return out
	}
	return map[string]any{
		"establishes":        conv(c.Establishes),
		"does_not_establish": conv(c.DoesNotEstablish),
	}
}

var coverage = map[string]Coverage{
	KindExit: {
		Establishes: []string{
			"the process the runtime started exited with this status, or was killed by this signal",
			"it ended within the time limit the runtime enforced, or was stopped at that limit",
		},
		DoesNotEstablish: []string{
			"that its output is correct: an exit status of 0 is the program's own claim of success",
			"anything about files or other effects it did not report and the runtime did not observe",
			"what processes it started and that outlived it did",
			"that it would exit the same way again",
		},
	},
	KindTestReport: {
		Establishes: []string{
			"which test cases the tool's output, as the runtime captured it, reported for this run, and the status of each, counted by the runtime",
			"whether that output was complete and consistent: build failures, truncation, plan and summary mismatches are listed as problems",
		},
		DoesNotEstablish: []string{
			"that code no test exercises is correct: the report says nothing about untested code",
			"that the tests test the right thing, or anything at all: a test that asserts nothing passes",
			"anything about tests that were not run: filtered out, skipped, marked TODO or never reported",
			"that a case's status is true: it is what the test tool wrote",
			"that the tests would pass again: flaky, order- or time-dependent tests",
		},
	},
	KindDigest: {
		Establishes: []string{
			"that these bytes hash to this value under the named hash function",
		},
		DoesNotEstablish: []string{
			"what the bytes mean, or that they are correct, safe or the intended ones",
			"where the bytes came from or who produced them",
			"that any file or location holds these bytes now",
		},
	},
	KindFile: {
		Establishes: []string{
			"that a file existed at this path with this digest (and size and mode) when the runtime observed it",
		},
		DoesNotEstablish: []string{
			"that the file still exists or is unchanged after the observation",
			"what its contents mean, or that they are correct",
			"who or what wrote it, or when",
			"anything about other files, including others in the same directory",
		},
	},
	KindApproval: {
		Establishes: []string{
			"that the named person approved this exact subject at the recorded time",
			"the expiry after which the approval no longer counts",
		},
		DoesNotEstablish: []string{
			"that the subject is correct, safe or complete",
			"that the person examined it, or was able to judge it",
			"approval of anything but this exact subject: a changed subject is not approved",
			"anything once the approval has expired",
		},
	},
	KindRead: {
		Establishes: []string{
			"that the runtime read these bytes (this digest) from the named source at the recorded time and gave them to the step",
		},
		DoesNotEstablish: []string{
			"that the step used, understood or believed what it read",
			"that the source is authoritative or correct, or still holds these bytes",
			"anything about the parts of the source that were not read",
		},
	},
	KindMutation: {
		Establishes: []string{
			"that the runtime made this change to this target, from the before digest to the after digest, at the recorded time",
		},
		DoesNotEstablish: []string{
			"that the change is correct, intended or complete",
			"that nothing else changed: changes made outside the runtime are not recorded",
			"that the change is still in place",
		},
	},
	KindHTTP: {
		Establishes: []string{
			"that a request the runtime made, with this method to this URL, got this status, these headers and a body with this digest, at the recorded time",
		},
		DoesNotEstablish: []string{
			"that the response is true, or that the server is who it claims to be beyond what TLS verified",
			"that the same request would get the same response now",
			"anything about the server's state beyond this response",
		},
	},
}

// CoverageOf returns what evidence of kind establishes and does not. The
// slices are the caller's to keep. An unknown kind establishes nothing, and
// its DoesNotEstablish says so.
func CoverageOf(kind string) Coverage {
	c, ok := coverage[kind]
	if !ok {
		return Coverage{
			Establishes:      []string{},
			DoesNotEstablish: []string{"anything: " + clean(kind, 100) + " is not a known evidence kind"},
		}
	}
	return Coverage{Establishes: slices.Clone(c.Establishes), DoesNotEstablish: slices.Clone(c.DoesNotEstablish)}
}

// Kinds returns the known evidence kinds, sorted.
func Kinds() []string {
	ks := make([]string, 0, len(coverage))
	for k := range coverage {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
