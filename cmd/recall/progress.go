package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a one-line "\r" progress bar with the rate and the time
// left on a terminal (stderr), and nothing elsewhere, so --json output and
// logs stay clean.
type progress struct {
	w     io.Writer
	total int
	unit  string
	on    bool
	start time.Time
	now   func() time.Time
}

// newProgress returns a bar over total units on f, drawn only when f is a
// terminal.
func newProgress(f *os.File, total int, unit string) *progress {
	fi, err := f.Stat()
	return newProgressTo(f, total, unit, err == nil && fi.Mode()&os.ModeCharDevice != 0, time.Now)
}

func newProgressTo(w io.Writer, total int, unit string, on bool, now func() time.Time) *progress {
	p := &progress{w: w, total: total, unit: unit, on: on && total > 0, now: now}
	p.start = now()
	if p.on {
		p.set(0)
	}
	return p
}

// set draws n of total done.
func (p *progress) set(n int) {
	if !p.on {
		return
	}
	const width = 30
	n = min(n, p.total)
	filled := width * n / p.total
	line := fmt.Sprintf("\r[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), n, p.total, p.unit)
	if elapsed := p.now().Sub(p.start); n > 0 && elapsed > 0 {
		rate := float64(n) / elapsed.Seconds()
		left := time.Duration(float64(p.total-n) / rate * float64(time.Second))
		line += fmt.Sprintf(", %.0f/s, %s left", rate, fmtDuration(left.Round(time.Second)))
	}
	fmt.Fprint(p.w, line+"\x1b[K")
}

// done ends the bar's line.
func (p *progress) done() {
	if p.on {
		fmt.Fprintln(p.w)
		p.on = false
	}
}
