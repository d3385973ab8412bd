// Package gate decides, from evidence the runtime observed, whether a
// Haygent's work may pass.
//
// A gate is a CEL predicate over one piece of evidence (an exit status, a
// parsed test report, a digest, a file, an approval, ...), wrapped in rules
// for everything that can make the evidence untrustworthy: it may be
// missing, stale, malformed, contradicted by other evidence, or the record
// of a run that timed out. PASS exists only when a gate, evaluated by this
// package over evidence the runtime observed, says so. A model's words are
// never evidence: a gate reads Evidence values and an Env, nothing else.
//
// # gates.json
//
// A Haygent package declares its gates in gates/gates.json:
//
//	{"gates": [
//	  {"id": "TEST_PASS", "evidence": "test_report", "subject": "step:test",
//	   "predicate": "ev.total > 0 && ev.failed == 0",
//	   "max_age": "10m",
//	   "contradicts": [{"evidence": "exit", "subject": "step:test",
//	                    "predicate": "ev.failed == 0 && other.code != 0"}],
//	   "on_missing": "fail", "on_stale": "fail", "on_invalid": "fail",
//	   "on_contradictory": "halt", "on_timeout": "fail"}
//	]}
//
// The file is one JSON object whose only key is "gates", an array of gate
// objects. Keys are matched exactly, case included; unknown keys, duplicate
// keys, null values, trailing data and invalid UTF-8 are refused (Parse).
// A gate object has:
//
//	key               JSON type  required  meaning
//	id                string     yes       1-128 of A-Z a-z 0-9 _ - . ; unique in the file
//	evidence          string     yes       the evidence kind read: exit, test_report, digest,
//	                                       file, read, mutation, http, approval
//	subject           string     no        only evidence about this subject; absent: any subject
//	predicate         string     yes       CEL over ev, of type bool (or dyn, checked when run)
//	max_age           string     no        Go duration ("10m", "1h30m"), > 0; absent: no age limit
//	contradicts       array      no        objects {evidence, subject, predicate}, see below
//	on_missing        string     yes       "fail" or "halt"
//	on_stale          string     yes       "fail" or "halt"
//	on_invalid        string     yes       "fail" or "halt"
//	on_contradictory  string     yes       "fail" or "halt"
//	on_timeout        string     yes       "fail" or "halt"
//
// A contradicts entry has evidence (string, required, a kind as above),
// subject (string, optional; absent means the subject of the evidence the
// gate selected) and predicate (string, required, CEL over ev and other, of
// type bool or dyn).
//
// The on_* rules say what each verdict other than PASS and FAIL means to the
// runtime: "fail" counts as a failed gate (repair may run), "halt" stops now
// with no repair. All five must be declared: a gate with no rule for missing
// evidence is an error, not a default.
//
// # Evidence
//
// Evidence.Data holds only the DAG-CBOR data model: nil, bool, string,
// int64, finite float64, []byte, []any and map[string]any, nested at most
// 512 levels. Anything else (a Go int, a NaN, a struct, a map that contains
// itself) makes the verdict INVALID: a NaN compares false with everything,
// so `!(ev.failed > 0)` would otherwise hold for a report whose failure count
// is NaN. Data["timed_out"] == true marks evidence of a run that timed out.
//
// # Evaluation
//
// Gate.Evaluate decides in this order, and the first step that decides ends
// the evaluation:
//
//  1. Select the evidence of the gate's kind (and subject, if set). None:
//     MISSING. Of several, the one with the latest ObservedAt; of several
//     observed at the same instant, the later in the slice.
//  2. If max_age is set and Env.Now - ObservedAt > max_age (or Env.Now is
//     zero, so age cannot be known): STALE. If ObservedAt is before
//     Env.LastChange[subject of the selected evidence]: STALE. Evidence
//     observed at exactly max_age, or at the instant of the change, is
//     fresh.
//  3. If Data["timed_out"] is true: TIMEOUT (if it is present and not a
//     bool: INVALID).
//  4. If Data is outside the data model: INVALID.
//  5. Contradictions. For each contradicts entry, the latest evidence of its
//     kind and subject (same tie rule); if there is one, its predicate is
//     evaluated with ev bound to the gate's evidence Data and other to that
//     evidence's Data (after the field check of step 6, for both). Built in, for gates on test_report: the latest exit
//     evidence of the selected report's subject whose integer "code" is not
//     zero while the report's "failed" is zero (a run that crashed cannot
//     report zero failures). If any of these holds: CONTRADICTORY. Otherwise,
//     if any could not be judged (an evaluation error or non-bool result,
//     other Data outside the data model, an exit evidence without an integer
//     code): INVALID, since a check that could not be made must not be
//     skipped.
//  6. The predicate, with ev bound to Data. First, Data must have every
//     top-level field the predicate reads (ev.f, ev["f"]) unless the
//     predicate tests for it (has(ev.f), "f" in ev): a field it lacks is
//     INVALID before anything is evaluated, because CEL's || and && would
//     otherwise absorb the "no such key" error (`ev.failed == 0 ||
//     ev.waived` holds under CEL when failed is absent and waived is true).
//     Then an evaluation error (a nested field missing, a type mismatch, the
//     cost limit) or a result that is not a bool: INVALID, with the error as
//     the reason. true: PASS. false: FAIL.
//
// The Result names the gate, the verdict, a reason, the Refs of every
// evidence read (selected first, then contradicting evidence, each once),
// and the action: "pass" for PASS, "fail" for FAIL, and the gate's on_* rule
// for the rest.
//
// # The CEL environment
//
// Predicates see the CEL standard library (size, string functions, matches
// with RE2, timestamps and durations, the all/exists/exists_one/map/filter
// macros) and nothing that reaches outside: no custom functions, no clock,
// no I/O. The gate predicate declares one variable, ev, of type
// map(string, dyn); contradiction predicates declare ev and other, both
// map(string, dyn). A gate predicate that names other does not compile.
//
// Predicates are compiled once by Compile, at most MaxPredicateLen code
// points and 1000 nodes after macro expansion; each evaluation is cut off at
// MaxCost (cel.CostLimit), so a comprehension over a large Data list cannot
// run unbounded. Numbers compare across int and double (`ev.failed == 0`
// holds for a float64 zero).
//
// # Lint
//
// Lint reports, for `hg haygent check`, everything Compile refuses plus
// duplicate ids and an empty gate list. Its point is gates that cannot
// fail: a predicate that reads no variable (`true`, `1 == 1`), that never
// reads ev, or that the checked AST proves can never be false (`ev.x ==
// ev.x || true`, `!false`, `ev.ok ? true : true`), or that no probe fails:
// the gate is evaluated over evidence values at the boundaries of every
// field the predicate reads (numbers at 0, 1, -1, the constants it names
// and their neighbours, the largest; lists empty and not; both booleans;
// strings empty, not, the constants; a field absent), typed as the gate's
// kind of evidence holds them, and a gate some probe passes and none fails
// (`ev.ok || !ev.ok`, `ev.failed >= 0 || ev.failed < 0`,
// `size(ev.problems) >= 0`) is refused with the probes it tried. Compile
// refuses those too, so the runtime never evaluates a gate that cannot
// fail even if the check was skipped. The lint can miss a gate that is
// always true for a reason no probe reaches.
//
// # Concurrency
//
// A *Gate is immutable once compiled; Evaluate may be called from any
// number of goroutines at once.
package gate
