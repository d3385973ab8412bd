package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/haygent/hg/internal/textsafe"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// All terminal output rules live here: results to stdout, diagnostics to
// stderr as "hg: error: ..." and "hg: hint: ...", progress bars only when
// stderr is a terminal.

// progressMin is the size below which no progress bar is drawn.
const progressMin = 32 << 20

type ui struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	forceProgress  bool // --progress: bars even when stderr is not a terminal
}

func (u *ui) errorf(format string, args ...any) {
	fmt.Fprintf(u.stderr, "hg: error: %s\n", oneLine(fmt.Sprintf(format, args...)))
}

func (u *ui) hintf(format string, args ...any) {
	fmt.Fprintf(u.stderr, "hg: hint: %s\n", oneLine(fmt.Sprintf(format, args...)))
}

func (u *ui) warnf(format string, args ...any) {
	fmt.Fprintf(u.stderr, "hg: warning: %s\n", oneLine(fmt.Sprintf(format, args...)))
}

// printf writes a result line to stdout.
func (u *ui) printf(format string, args ...any) {
	fmt.Fprintf(u.stdout, format, args...)
}

// printJSON writes v as one line of JSON to stdout.
func (u *ui) printJSON(v any) error {
	enc := json.NewEncoder(u.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// oneLine makes s one line of visible text: line breaks become spaces and
// every other control, format or bidi character is escaped, since an
// error or a detail can quote a ledger (textsafe.Escape).
func oneLine(s string) string {
	return textsafe.Escape(strings.ReplaceAll(strings.TrimSpace(s), "\n", " "))
}

// stderrIsTerminal reports whether a person is watching stderr.
func (u *ui) stderrIsTerminal() bool {
	f, ok := u.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// showProgress says whether to draw progress: on a terminal, or anywhere
// with --progress.
func (u *ui) showProgress() bool { return u.forceProgress || u.stderrIsTerminal() }

// progress returns a callback that draws a byte progress bar of total
// bytes (-1 if unknown) on stderr, and a func to finish it. Both do
// nothing unless stderr is a terminal (or --progress) and the work is
// large.
func (u *ui) progress(desc string, total int64) (update func(done int64), finish func()) {
	if !u.showProgress() || (total >= 0 && total < progressMin) {
		return func(int64) {}, func() {}
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(u.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
	return func(done int64) { _ = bar.Set64(done) }, func() { _ = bar.Finish() }
}

// countProgress returns a callback that draws a progress bar of items
// (done out of total) on stderr, and a func to finish it. Both do nothing
// unless stderr is a terminal, and the bar appears only for work of at
// least min items.
func (u *ui) countProgress(desc string, min int) (update func(done, total int), finish func()) {
	if !u.showProgress() {
		return func(int, int) {}, func() {}
	}
	var bar *progressbar.ProgressBar
	update = func(done, total int) {
		if total < min {
			return
		}
		if bar == nil {
			bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(u.stderr),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionShowCount(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionSetWidth(30),
			)
		}
		_ = bar.Set(done)
	}
	finish = func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}
	return update, finish
}
