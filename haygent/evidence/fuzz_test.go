package evidence_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/haygent/hg/haygent/evidence"
)

// seed adds every fixture in testdata/dir and the extra inputs.
func seed(f *testing.F, dir string, extra ...string) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// fuzzParse checks that parse never panics, fails only with ErrNoReport on
// an in-memory reader, and returns a consistent report.
func fuzzParse(t *testing.T, data []byte, parse func(*bytes.Reader) (*evidence.TestReport, error)) {
	r, err := parse(bytes.NewReader(data))
	if err != nil {
		if r != nil {
			t.Fatalf("report and error: %v", err)
		}
		if !errors.Is(err, evidence.ErrNoReport) && !errors.Is(err, evidence.ErrUnknownFormat) {
			t.Fatalf("error that is not ErrNoReport: %v", err)
		}
		return
	}
	checkInvariants(t, r)
}

func FuzzParseGoTestJSON(f *testing.F) {
	seed(f, "gotest",
		`{"Action":"run","Test":"T"}`,
		`{"Action":"fail","Package":"p","FailedBuild":"p"}`,
		`{"Action":"build-fail","ImportPath":"p [p.test]"}`,
		"not json\n{\"Action\":\"pass\"}\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParse(t, data, func(r *bytes.Reader) (*evidence.TestReport, error) { return evidence.ParseGoTestJSON(r) })
	})
}

func FuzzParseJUnit(f *testing.F) {
	seed(f, "junit",
		`<testsuite tests="1"><testcase name="a"><failure/></testcase></testsuite>`,
		`<testsuites><testsuite><testsuite><testcase/></testsuite></testsuite></testsuites>`,
		`<?xml version="1.0" encoding="latin1"?><testsuite name="`+"\xe9"+`"/>`)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParse(t, data, func(r *bytes.Reader) (*evidence.TestReport, error) { return evidence.ParseJUnit(r) })
	})
}

func FuzzParseTAP(f *testing.F) {
	seed(f, "tap",
		"1..2\nok 1\nnot ok 2 # TODO x\n",
		"ok 1 - a \\# b # SKIP\n1..1\n",
		"1..1\nnot ok 1\n  ---\n  a: b\n",
		"    Bail out!\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParse(t, data, func(r *bytes.Reader) (*evidence.TestReport, error) { return evidence.ParseTAP(r) })
	})
}

func FuzzParseTestReportAuto(f *testing.F) {
	seed(f, "gotest")
	seed(f, "junit")
	seed(f, "tap")
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzParse(t, data, func(r *bytes.Reader) (*evidence.TestReport, error) {
			return evidence.ParseTestReport(evidence.FormatAuto, r)
		})
	})
}
