//go:build linux || darwin

package main_test

// The end-to-end benchmark of the hg binary on a 1 GiB file. It measures,
// in one sitting and on the same bytes:
//
//   - `hg put FILE` into a fresh store, next to a plain fsync'd copy of the
//     file (1 MiB reads and writes, one fsync at the end: what
//     `dd bs=1M conv=fsync` does) and, when dd is installed, dd itself;
//   - `hg get CID -o /dev/null`, which verifies every block as the CLI
//     always does, next to Go's crypto/sha256 over the same bytes;
//   - the peak resident set of the put and of the get.
//
// The figures (docs/performance.md, "Targets") are printed with their targets; none is
// asserted. Run it with
//
//	go test -run '^$' -bench '^BenchmarkHG$' -benchtime 1x ./cmd/hg/
//
// Every operation runs once uncounted, then b.N times measured (once under
// `make bench`); see benchOps.measure. It needs about 4 GiB of free disk in
// the temp dir, and is skipped with -short.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	benchFileSize = 1 << 30 // the file put and got
	benchMinFree  = 4 << 30 // free disk the benchmark wants in its temp dir
	benchCopyBuf  = 1 << 20 // the buffer of the fsync'd copy, as dd bs=1M

	// Targets, printed next to the figures.
	benchTargetPutCopy = 1.3 // put wall time at most 1.3× the fsync'd copy
	benchTargetGetSHA  = 0.7 // get throughput at least 0.7× sha256
	benchTargetPeakMiB = 100 // peak RSS of put and of get under 100 MiB
)

// benchProc is what one run of a child process cost.
type benchProc struct {
	wall       time.Duration
	user, sys  time.Duration
	peakMiB    float64 // max RSS
	writtenMiB float64 // written to the block layer (Linux only)
	floor      float64 // this process's own peak RSS when it started the child
	stdout     string
}

func (p *benchProc) add(q benchProc) {
	p.wall += q.wall
	p.user += q.user
	p.sys += q.sys
	p.peakMiB = max(p.peakMiB, q.peakMiB)
	p.writtenMiB += q.writtenMiB
	p.floor = max(p.floor, q.floor)
}

func (p *benchProc) div(n int) {
	p.wall /= time.Duration(n)
	p.user /= time.Duration(n)
	p.sys /= time.Duration(n)
	p.writtenMiB /= float64(n)
}

// benchRound holds the mean figures of the measured runs.
type benchRound struct {
	sha256   time.Duration
	copy     time.Duration
	dd       benchProc // zero without dd
	put, get benchProc
	withDD   bool
	rounds   int // measured runs averaged
	procs    int // GOMAXPROCS
}

// BenchmarkHG measures the hg binary on a 1 GiB file against an fsync'd
// copy and sha256 of the same file. BenchmarkHG builds hg and writes the
// file; its sub-benchmark 1GiB measures and reports the metrics; the table
// of figures and targets is printed last, on its own lines.
func BenchmarkHG(b *testing.B) {
	fb, hg := newFileBench(b, "put/get", "hg-bench-*", benchMinFree)
	o := &benchOps{fileBench: fb, hg: hg}
	o.dd, _ = exec.LookPath("dd")

	var (
		r    benchRound
		done bool
	)
	b.Run("1GiB", func(b *testing.B) {
		b.StopTimer()
		o.b = b
		r = o.measure()
		benchReport(b, r)
		done = true
	})
	if done {
		fmt.Print(benchTable(r))
	}
}

// benchOps runs the measured operations.
type benchOps struct {
	fileBench
	hg, dd string // the programs; dd is "" if not installed
	cid    string // the file's hg CID, once known
	store  string // the store of the last put
	puts   int
}

// newFileBench skips in -short mode or without minFree bytes of disk,
// and otherwise makes a temporary directory (removed at the end), builds
// hg into it and writes the 1 GiB input file. what names the benchmark in
// the skip messages.
func newFileBench(b *testing.B, what, pattern string, minFree uint64) (fileBench, string) {
	if testing.Short() {
		b.Skipf("skipping the 1 GiB %s benchmark in -short mode", what)
	}
	tmp, err := os.MkdirTemp("", pattern)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(tmp) })
	if free, err := benchFreeBytes(tmp); err != nil {
		b.Skipf("skipping the 1 GiB %s benchmark: cannot tell the free disk space of %s: %v", what, tmp, err)
	} else if free < minFree {
		b.Skipf("skipping the 1 GiB %s benchmark: only %.1f GiB free in %s, it needs %d GiB",
			what, float64(free)/(1<<30), tmp, minFree>>30)
	}
	fb := fileBench{tmp: tmp, in: filepath.Join(tmp, "in.bin")}
	hg := benchBuildHG(b, tmp)
	benchWriteFile(b, fb.in, benchFileSize)
	return fb, hg
}

// fileBench is the 1 GiB input file of a benchmark and the reference
// timings every hg figure is compared with.
type fileBench struct {
	b       *testing.B
	tmp, in string // the temp dir and the 1 GiB file in it
	inSum   string // the file's sha256, once known
}

// measure runs each operation once uncounted, then b.N times measured,
// and returns the mean figures. The warm-up run of an operation comes
// right before its measured runs: on a virtual machine that hands freed
// memory back to the host, the first writer of 1 GiB of page cache after a
// pause pays for host faults (an fsync'd copy: 1.5-2 s cold, 0.5 s warm)
// and the run right after it reuses the memory the warm-up freed. Each
// operation starts with the file in the page cache and nothing dirty.
// hg get's output is checked against the file's sha256, untimed.
func (o *benchOps) measure() benchRound {
	b := o.b
	n := b.N
	r := benchRound{withDD: o.dd != "", rounds: n, procs: runtime.GOMAXPROCS(0)}

	r.sha256 = warmMean(n, o.sha256)
	r.copy = warmMean(n, o.copy)
	if o.dd != "" {
		r.dd = warmMeanProc(n, o.ddCopy)
	}
	r.put = warmMeanProc(n, o.put)
	r.get = warmMeanProc(n, o.get)

	// Untimed: the get gives back the very bytes that were put.
	h := sha256.New()
	benchRun(b, h, o.hg, "--store", o.store, "get", o.cid)
	if got := hex.EncodeToString(h.Sum(nil)); got != o.inSum {
		b.Fatalf("hg get %s gave bytes with sha256 %s; the file has %s", o.cid, got, o.inSum)
	}
	return r
}

// settle brings the file back into the page cache if it was evicted and
// writes back every dirty page, so that no operation pays for another.
func (o *fileBench) settle() {
	benchSHA256File(o.b, o.in)
	syscall.Sync()
}

// sha256 times Go's crypto/sha256 over the file, one core, 1 MiB at a
// time.
func (o *fileBench) sha256() time.Duration {
	o.settle()
	start := time.Now()
	sum := benchSHA256File(o.b, o.in)
	d := time.Since(start)
	if o.inSum != "" && sum != o.inSum {
		o.b.Fatalf("the file's sha256 changed from %s to %s", o.inSum, sum)
	}
	o.inSum = sum
	return d
}

// copy times the fsync'd copy, as dd bs=1M conv=fsync, and removes it.
func (o *fileBench) copy() time.Duration {
	out := filepath.Join(o.tmp, "copy.bin")
	o.settle()
	start := time.Now()
	benchCopyFsync(o.b, o.in, out)
	d := time.Since(start)
	if err := os.Remove(out); err != nil {
		o.b.Fatal(err)
	}
	return d
}

// ddCopy times dd bs=1M conv=fsync and removes its copy.
func (o *benchOps) ddCopy() benchProc {
	out := filepath.Join(o.tmp, "dd.bin")
	o.settle()
	p := benchRun(o.b, nil, o.dd, "if="+o.in, "of="+out, "bs=1M", "conv=fsync")
	if err := os.Remove(out); err != nil {
		o.b.Fatal(err)
	}
	return p
}

// put times hg put of the file into a fresh store, which it leaves for
// get; it removes the store of the put before.
func (o *benchOps) put() benchProc {
	if o.store != "" {
		if err := os.RemoveAll(o.store); err != nil {
			o.b.Fatal(err)
		}
	}
	o.puts++
	o.store = filepath.Join(o.tmp, fmt.Sprintf("store%d", o.puts))
	benchRun(o.b, nil, o.hg, "--store", o.store, "init")
	o.settle()
	p := benchRun(o.b, nil, o.hg, "--store", o.store, "put", o.in)
	c := strings.TrimSpace(p.stdout)
	if o.cid != "" && c != o.cid {
		o.b.Fatalf("hg put gave %s, and %s before", c, o.cid)
	}
	o.cid = c
	return p
}

// get times hg get CID -o /dev/null from the store of the last put.
func (o *benchOps) get() benchProc {
	syscall.Sync()
	return benchRun(o.b, nil, o.hg, "--store", o.store, "get", o.cid, "-o", os.DevNull)
}

const benchMB = 1e6

func benchRate(d time.Duration) float64 { return float64(benchFileSize) / benchMB / d.Seconds() }

// benchReport reports the figures as metrics.
func benchReport(b *testing.B, r benchRound) {
	b.ReportMetric(0, "ns/op") // an op is a run of everything: meaningless
	b.ReportMetric(r.put.wall.Seconds(), "put-s")
	b.ReportMetric(r.get.wall.Seconds(), "get-s")
	b.ReportMetric(r.copy.Seconds(), "copy-fsync-s")
	if r.withDD {
		b.ReportMetric(r.dd.wall.Seconds(), "dd-fsync-s")
	}
	b.ReportMetric(r.sha256.Seconds(), "sha256-s")
	b.ReportMetric(benchRate(r.sha256), "sha256-MB/s")
	b.ReportMetric(benchRate(r.put.wall), "put-MB/s")
	b.ReportMetric(benchRate(r.get.wall), "get-MB/s")
	b.ReportMetric(benchRate(r.copy), "copy-fsync-MB/s")
	b.ReportMetric(r.put.wall.Seconds()/r.copy.Seconds(), "put/copy-ratio")
	b.ReportMetric(r.sha256.Seconds()/r.get.wall.Seconds(), "get/sha256-ratio")
	b.ReportMetric(r.put.peakMiB, "put-peak-MiB")
	b.ReportMetric(r.get.peakMiB, "get-peak-MiB")
	b.ReportMetric((r.put.user + r.put.sys).Seconds(), "put-cpu-s")
	b.ReportMetric((r.get.user + r.get.sys).Seconds(), "get-cpu-s")
	if runtime.GOOS == "linux" {
		b.ReportMetric(r.put.writtenMiB, "put-written-MiB")
	}
}

// warmMean runs op once uncounted, then n times, and returns the mean of
// the n: the warm-up comes right before the measured runs (see measure).
func warmMean(n int, op func() time.Duration) time.Duration {
	op()
	var sum time.Duration
	for range n {
		sum += op()
	}
	return sum / time.Duration(n)
}

// warmMeanProc is warmMean for an operation run as a process.
func warmMeanProc(n int, op func() benchProc) benchProc {
	op()
	var sum benchProc
	for range n {
		sum.add(op())
	}
	sum.div(n)
	return sum
}

// verdict says whether a target is met, in the tables.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// benchTable returns the figures as a table with the targets.
func benchTable(r benchRound) string {
	putCopy := r.put.wall.Seconds() / r.copy.Seconds()
	getSHA := r.sha256.Seconds() / r.get.wall.Seconds()
	var t strings.Builder
	fmt.Fprintf(&t, "\nhg on a %d MiB file, %d CPUs, GOMAXPROCS %d; mean of %d measured run(s) after one warm-up run of each operation.\n",
		benchFileSize>>20, runtime.NumCPU(), r.procs, r.rounds)
	fmt.Fprintf(&t, "Every operation starts with the file in the page cache and no dirty pages.\n")
	fmt.Fprintf(&t, "  %-34s %8s %9s %7s %9s %9s\n", "operation", "wall s", "MB/s", "cpu s", "peak MiB", "disk MiB")
	row := func(name string, d, cpu time.Duration, peak, written float64) {
		cpuS, peakS, writtenS := "-", "-", "-"
		if cpu > 0 {
			cpuS = fmt.Sprintf("%.2f", cpu.Seconds())
		}
		if peak > 0 {
			peakS = fmt.Sprintf("%.1f", peak)
		}
		if written > 0 {
			writtenS = fmt.Sprintf("%.0f", written)
		}
		fmt.Fprintf(&t, "  %-34s %8.3f %9.1f %7s %9s %9s\n", name, d.Seconds(), benchRate(d), cpuS, peakS, writtenS)
	}
	row("Go crypto/sha256 of the file", r.sha256, 0, 0, 0)
	row("fsync'd copy (Go, 1 MiB writes)", r.copy, 0, 0, 0)
	if r.withDD {
		row("dd bs=1M conv=fsync", r.dd.wall, r.dd.user+r.dd.sys, r.dd.peakMiB, r.dd.writtenMiB)
	}
	row("hg put FILE (fresh store)", r.put.wall, r.put.user+r.put.sys, r.put.peakMiB, r.put.writtenMiB)
	row("hg get CID -o /dev/null", r.get.wall, r.get.user+r.get.sys, r.get.peakMiB, r.get.writtenMiB)
	fmt.Fprintf(&t, "Targets (measured, not asserted):\n")
	fmt.Fprintf(&t, "  put wall / fsync'd copy wall  %6.2f   target <= %.1f   %s\n",
		putCopy, benchTargetPutCopy, verdict(putCopy <= benchTargetPutCopy))
	fmt.Fprintf(&t, "  get MB/s / sha256 MB/s        %6.2f   target >= %.1f   %s\n",
		getSHA, benchTargetGetSHA, verdict(getSHA >= benchTargetGetSHA))
	fmt.Fprintf(&t, "  put peak RSS MiB              %6.1f   target < %d     %s\n",
		r.put.peakMiB, benchTargetPeakMiB, verdict(r.put.peakMiB < benchTargetPeakMiB))
	fmt.Fprintf(&t, "  get peak RSS MiB              %6.1f   target < %d     %s\n",
		r.get.peakMiB, benchTargetPeakMiB, verdict(r.get.peakMiB < benchTargetPeakMiB))
	fmt.Fprintf(&t, "  (peak RSS is the child's ru_maxrss, which on Linux cannot be below the benchmark's own\n")
	fmt.Fprintf(&t, "   peak RSS when it starts the child: %.1f MiB at most here)\n", max(r.put.floor, r.get.floor))
	fmt.Fprintf(&t, "  (the benchmark checks hg get's output against the file's sha256 once, untimed)\n\n")
	return t.String()
}

// benchRun runs a program and returns what it cost; its stdout goes to
// stdout if not nil, else is returned. A failure is fatal.
func benchRun(b *testing.B, stdout io.Writer, prog string, args ...string) benchProc {
	cmd := exec.Command(prog, args...)
	cmd.Env = append(os.Environ(), "HG_STORE=") // only --store counts
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout = &outBuf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	cmd.Stderr = &errBuf
	floor := benchSelfPeakMiB()
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		b.Fatalf("%s %s: %v\n%s", filepath.Base(prog), strings.Join(args, " "), err, errBuf.Bytes())
	}
	p := benchProc{
		wall:   wall,
		user:   cmd.ProcessState.UserTime(),
		sys:    cmd.ProcessState.SystemTime(),
		stdout: outBuf.String(),
		floor:  floor,
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.peakMiB = benchMaxRSSMiB(int64(ru.Maxrss))
		if runtime.GOOS == "linux" {
			p.writtenMiB = float64(ru.Oublock) * 512 / (1 << 20) // 512-byte units
		}
	}
	return p
}

// benchSelfPeakMiB returns this process's peak RSS (VmHWM), which the
// ru_maxrss of a child it starts cannot be below on Linux; 0 elsewhere.
func benchSelfPeakMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kib float64
		if _, err := fmt.Sscanf(line, "VmHWM: %f kB", &kib); err == nil {
			return kib / (1 << 10)
		}
	}
	return 0
}

// benchMaxRSSMiB converts getrusage's ru_maxrss to MiB: it is in KiB on
// Linux and in bytes on macOS.
func benchMaxRSSMiB(maxrss int64) float64 {
	if runtime.GOOS == "darwin" {
		return float64(maxrss) / (1 << 20)
	}
	return float64(maxrss) / (1 << 10)
}

// benchBuildHG builds the hg binary into dir and returns its path.
func benchBuildHG(b *testing.B, dir string) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		b.Fatalf("the module root is not two levels up from the test's directory: %v", err)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	hg := filepath.Join(dir, "hg")
	cmd := exec.Command(goCmd, "build", "-o", hg, "./cmd/hg")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/hg: %v\n%s", err, out)
	}
	return hg
}

// benchWriteFile writes size deterministic pseudo-random bytes to path and
// syncs them, so that no writeback of it runs during the measurements.
func benchWriteFile(b *testing.B, path string, size int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rng := rand.NewChaCha8(sha256.Sum256([]byte("hg benchmark file")))
	buf := make([]byte, benchCopyBuf)
	for left := size; left > 0; left -= len(buf) {
		buf = buf[:min(len(buf), left)]
		_, _ = rng.Read(buf)
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// benchSHA256File returns the hex sha256 of the file, read 1 MiB at a time.
func benchSHA256File(b *testing.B, path string) string {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, benchCopyBuf)); err != nil {
		b.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// benchCopyFsync copies src to a new file dst 1 MiB at a time and fsyncs
// it once at the end, as dd bs=1M conv=fsync does.
func benchCopyFsync(b *testing.B, src, dst string) {
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	buf := make([]byte, benchCopyBuf)
	for {
		n, err := io.ReadFull(in, buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				b.Fatal(werr)
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := out.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// benchFreeBytes returns the bytes free to an unprivileged user in the
// file system of dir.
func benchFreeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}
