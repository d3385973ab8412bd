// Package evidence turns what the runtime observed into typed evidence a
// gate can judge, and says for every kind of evidence what it does not
// establish.
//
// Evidence is what the runtime itself saw: an exit status, the bytes a test
// tool wrote to standard output, a digest. Text written by a model is never
// evidence, and neither is a summary a tool prints about itself: test reports
// are judged by counting their cases, never by trusting a "tests=" attribute
// or a closing "PASS" line.
//
// # Test reports
//
// [ParseGoTestJSON], [ParseJUnit] and [ParseTAP] read the output of a test
// tool into a [TestReport]; [ParseTestReport] picks one by name or by
// sniffing the input. A report counts its cases (Total = Passed + Failed +
// Skipped + Todo, always) and lists in Problems everything that makes the
// run untrustworthy even where no case failed: a build failure, a stream that
// ends mid-test, a plan that does not match, a summary that disagrees with
// the cases. [TestReport.OK] is true only for a report with at least one
// case, no failure and no problem, so a report with problems can never be
// mistaken for a passing one. [TestReport.Data] is the bounded map a CEL gate
// sees; it carries "ok" so a gate need not repeat that rule.
//
// Parsers return an error only when nothing recognisable arrives (empty
// input, another format) or the reader fails. Damage after the first
// recognisable line becomes a Problem, so a truncated or partly garbled
// report is still evidence, and never green.
//
// # Counting go test -json
//
//   - A case is one test run that ends with a pass, fail or skip event. A
//     subtest is a case of its own ("TestTable/large"), and so is its parent,
//     so a failing subtest usually counts twice: once itself and once as the
//     parent it failed. With -count=N every run is a case.
//   - A test that starts ("run") but never ends is counted as failed, with a
//     Problem: the stream was cut off, the binary crashed, or the test timed
//     out (test2json reports a timed-out test's panic but no end for it).
//   - A package that fails, or never reports a final result, without any of
//     its cases failing (build or vet failure, TestMain exiting non-zero, a
//     crash outside a test) is counted as a failed pseudo-case named
//     "<package> (package)", with a Problem. A build that fails can therefore
//     never look like zero failures. A package whose build failed but that
//     never reported a result is counted the same way under its import path.
//   - Benchmarks (Benchmark* at the top level) are not tests: they count only
//     when they fail. test2json never ends a passing benchmark, so an
//     unfinished benchmark is not a Problem. Examples and fuzz targets (with
//     their seed corpus) are cases like tests.
//   - A package with no test files ends with a package-level skip and adds
//     no case.
//   - Lines that are not JSON (go test before Go 1.24, or with
//     GODEBUG=gotestjsonbuildtext=1, prints build errors as plain text) are
//     kept, run by run, as Problems. Pass only standard output: anything
//     else the go command writes to standard error would become a Problem
//     too.
//
// # Counting JUnit XML
//
//   - Every <testcase> under a <testsuites> or <testsuite> element, at any
//     depth, is a case. One with a <failure> or an <error> child is failed,
//     else one with a <skipped> child is skipped, else it passed. Surefire's
//     <flakyFailure> and <rerunFailure> children do not change the status.
//   - The tests=, failures=, errors= and skipped= attributes are never used
//     for counting. Each one present on a suite is compared with the cases
//     counted inside it, and a difference is a Problem (failures= and
//     errors= are compared as a sum, since tools split them differently).
//   - Case.Suite is the testcase's classname, or the innermost suite's name
//     when there is none or it only repeats the case's name (jest-junit).
//
// # Counting TAP
//
//   - TAP 13 and 14 are read; the version line is optional. Every top-level
//     "ok" or "not ok" line is a case. Subtests (indented lines, TAP 14) are
//     not counted: the parent's own test line summarises them.
//   - "# SKIP" makes a case skipped, but "not ok # SKIP" is failed, as in
//     TAP::Parser. "# TODO" makes a case todo whether it passed or failed: a
//     failing TODO test is expected to fail and is not a failure, and a
//     passing one has not been promoted to a real test yet.
//   - A missing plan, a second plan, a plan in the middle, a plan that does
//     not match the number of cases, test numbers out of sequence and an
//     unterminated YAML block are Problems.
//   - "Bail out!" (also inside a subtest) stops reading, is a Problem and
//     adds a failed pseudo-case named after it.
//   - YAML diagnostic blocks are not parsed as test lines; for a case that
//     did not pass they become its Message, and a "duration_ms" key its
//     Duration. '#' lines right after a failed test line (Test::More's
//     "#   Failed test ...") are added to its Message.
//   - Other lines are ignored, unless "pragma +strict" is in force.
//
// # Limits
//
// Input is read up to [MaxInputSize]; anything beyond it is not read and the
// report carries a Problem. Lines longer than [MaxLineSize] are cut. Case
// names and messages are cut to [MaxNameSize] and [MaxMessageSize], the
// Problems list to [MaxProblems] entries, Cases to [MaxCases] (the counts
// still cover every case), and [TestReport.Data] lists at most
// [MaxFailedCases] failed cases. Every string is made valid UTF-8 without
// NUL bytes, so a report always encodes as DAG-CBOR.
//
// encoding/xml does not expand entities declared in a DTD (an undeclared
// entity is a syntax error), and never fetches external ones, so an entity
// expansion bomb or an external entity cannot make the JUnit parser read
// anything but its input.
//
// # Coverage
//
// [CoverageOf] says, for each evidence kind ([KindExit], [KindTestReport],
// ...), what a piece of evidence of that kind establishes and what it does
// not, so a gate and the person reading its receipt can see the gap between
// "the tests passed" and "the code is right".
package evidence
