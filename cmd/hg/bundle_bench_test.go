//go:build linux || darwin

package main_test

// The end-to-end benchmark of bundles: a 1 GiB file, stored with hg put,
// goes out with `hg bundle export` and into a fresh store with
// `hg bundle import`, next to Go's crypto/sha256 over the same bytes (the
// target: each at least 0.6× its throughput) and an fsync'd copy of the
// file (what the disk allows an import, which must write and sync every
// byte). Nothing is asserted. Run it with
//
//	go test -run '^$' -bench '^BenchmarkBundle$' -benchtime 1x ./cmd/hg/
//
// Every operation runs once uncounted, then b.N times measured. It needs
// about 5 GiB of free disk in the temp dir, and is skipped with -short.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	bundleBenchMinFree   = 5 << 30
	bundleBenchTargetSHA = 0.6 // export and import at least 0.6× sha256
)

// bundleRound holds the mean figures of the measured runs.
type bundleRound struct {
	sha256, copy  time.Duration
	put, exp, imp benchProc
	carBytes      int64
	rounds        int
}

// BenchmarkBundle measures hg bundle export and import of a 1 GiB file
// against sha256 and an fsync'd copy of the same file.
func BenchmarkBundle(b *testing.B) {
	fb, hg := newFileBench(b, "bundle", "hg-bundle-bench-*", bundleBenchMinFree)
	o := &bundleOps{fileBench: fb, hg: hg, car: filepath.Join(fb.tmp, "out.car"), src: filepath.Join(fb.tmp, "src")}
	benchRun(b, nil, o.hg, "--store", o.src, "init")
	o.cid = strings.TrimSpace(benchRun(b, nil, o.hg, "--store", o.src, "put", o.in).stdout)

	var (
		r    bundleRound
		done bool
	)
	b.Run("1GiB", func(b *testing.B) {
		b.StopTimer()
		o.b = b
		r = o.measure()
		bundleReport(b, r)
		done = true
	})
	if done {
		fmt.Print(bundleTable(r))
	}
}

// bundleOps runs the measured operations.
type bundleOps struct {
	fileBench
	car      string // the bundle
	src, dst string // the store the file was put in; the last import's store
	hg, cid  string
	imports  int
}

// measure runs each operation once uncounted, then b.N times measured,
// each right after its own warm-up, and checks, untimed, that the
// imported file is the file put.
func (o *bundleOps) measure() bundleRound {
	n := o.b.N
	r := bundleRound{rounds: n}
	r.sha256 = warmMean(n, o.sha256)
	r.copy = warmMean(n, o.copy)
	r.put = warmMeanProc(n, o.put)
	r.exp = warmMeanProc(n, o.export)
	r.imp = warmMeanProc(n, o.importCAR)
	info, err := os.Stat(o.car)
	if err != nil {
		o.b.Fatal(err)
	}
	r.carBytes = info.Size()

	h := sha256.New()
	benchRun(o.b, h, o.hg, "--store", o.dst, "get", o.cid)
	if got := hex.EncodeToString(h.Sum(nil)); got != o.inSum {
		o.b.Fatalf("the imported file has sha256 %s; the file put has %s", got, o.inSum)
	}
	return r
}

// put times hg put of the file into a fresh store: what an import of
// the same bytes is to be compared with.
func (o *bundleOps) put() benchProc {
	dir := filepath.Join(o.tmp, "put")
	if err := os.RemoveAll(dir); err != nil {
		o.b.Fatal(err)
	}
	benchRun(o.b, nil, o.hg, "--store", dir, "init")
	o.settle()
	p := benchRun(o.b, nil, o.hg, "--store", dir, "put", o.in)
	if err := os.RemoveAll(dir); err != nil {
		o.b.Fatal(err)
	}
	return p
}

// export times hg bundle export of the file's root into a new file.
func (o *bundleOps) export() benchProc {
	if err := os.Remove(o.car); err != nil && !os.IsNotExist(err) {
		o.b.Fatal(err)
	}
	o.settle()
	return benchRun(o.b, nil, o.hg, "--store", o.src, "bundle", "export", o.cid, "-o", o.car)
}

// importCAR times hg bundle import of the bundle into a fresh store,
// removing the store of the import before.
func (o *bundleOps) importCAR() benchProc {
	if o.dst != "" {
		if err := os.RemoveAll(o.dst); err != nil {
			o.b.Fatal(err)
		}
	}
	o.imports++
	o.dst = filepath.Join(o.tmp, fmt.Sprintf("dst%d", o.imports))
	benchRun(o.b, nil, o.hg, "--store", o.dst, "init")
	benchSHA256File(o.b, o.car) // the bundle in the page cache, as the file is for the others
	syscall.Sync()
	return benchRun(o.b, nil, o.hg, "--store", o.dst, "bundle", "import", o.car)
}

func bundleReport(b *testing.B, r bundleRound) {
	b.ReportMetric(0, "ns/op") // an op is a run of everything: meaningless
	b.ReportMetric(benchRate(r.sha256), "sha256-MB/s")
	b.ReportMetric(benchRate(r.copy), "copy-fsync-MB/s")
	b.ReportMetric(benchRate(r.exp.wall), "export-MB/s")
	b.ReportMetric(benchRate(r.imp.wall), "import-MB/s")
	b.ReportMetric(r.sha256.Seconds()/r.exp.wall.Seconds(), "export/sha256-ratio")
	b.ReportMetric(r.sha256.Seconds()/r.imp.wall.Seconds(), "import/sha256-ratio")
	b.ReportMetric(r.copy.Seconds()/r.imp.wall.Seconds(), "import/copy-ratio")
	b.ReportMetric(r.put.wall.Seconds()/r.imp.wall.Seconds(), "import/put-ratio")
	b.ReportMetric(r.exp.peakMiB, "export-peak-MiB")
	b.ReportMetric(r.imp.peakMiB, "import-peak-MiB")
	b.ReportMetric((r.exp.user + r.exp.sys).Seconds(), "export-cpu-s")
	b.ReportMetric((r.imp.user + r.imp.sys).Seconds(), "import-cpu-s")
}

func bundleTable(r bundleRound) string {
	expSHA := r.sha256.Seconds() / r.exp.wall.Seconds()
	impSHA := r.sha256.Seconds() / r.imp.wall.Seconds()
	var t strings.Builder
	fmt.Fprintf(&t, "\nhg bundles of a %d MiB file (a %d-byte CAR), %d CPUs, GOMAXPROCS %d; mean of %d measured run(s) after one warm-up run of each.\n",
		benchFileSize>>20, r.carBytes, runtime.NumCPU(), runtime.GOMAXPROCS(0), r.rounds)
	fmt.Fprintf(&t, "  %-44s %8s %9s %7s %9s\n", "operation", "wall s", "MB/s", "cpu s", "peak MiB")
	row := func(name string, d, cpu time.Duration, peak float64) {
		cpuS, peakS := "-", "-"
		if cpu > 0 {
			cpuS = fmt.Sprintf("%.2f", cpu.Seconds())
		}
		if peak > 0 {
			peakS = fmt.Sprintf("%.1f", peak)
		}
		fmt.Fprintf(&t, "  %-44s %8.3f %9.1f %7s %9s\n", name, d.Seconds(), benchRate(d), cpuS, peakS)
	}
	row("Go crypto/sha256 of the file", r.sha256, 0, 0)
	row("fsync'd copy of the file (the disk)", r.copy, 0, 0)
	row("hg put FILE (fresh store)", r.put.wall, r.put.user+r.put.sys, r.put.peakMiB)
	row("hg bundle export CID -o FILE.car", r.exp.wall, r.exp.user+r.exp.sys, r.exp.peakMiB)
	row("hg bundle import FILE.car (fresh store)", r.imp.wall, r.imp.user+r.imp.sys, r.imp.peakMiB)
	fmt.Fprintf(&t, "Targets (measured, not asserted):\n")
	fmt.Fprintf(&t, "  export MB/s / sha256 MB/s     %6.2f   target >= %.1f   %s\n", expSHA, bundleBenchTargetSHA, verdict(expSHA >= bundleBenchTargetSHA))
	fmt.Fprintf(&t, "  import MB/s / sha256 MB/s     %6.2f   target >= %.1f   %s\n", impSHA, bundleBenchTargetSHA, verdict(impSHA >= bundleBenchTargetSHA))
	fmt.Fprintf(&t, "  (an import writes and fsyncs every byte, as hg put does, its large blocks past the page cache;\n")
	fmt.Fprintf(&t, "   the fsync'd copy goes through it: here %.2f× sha256; import MB/s / fsync'd copy MB/s %.2f, / hg put MB/s %.2f)\n\n",
		r.sha256.Seconds()/r.copy.Seconds(), r.copy.Seconds()/r.imp.wall.Seconds(), r.put.wall.Seconds()/r.imp.wall.Seconds())
	return t.String()
}
