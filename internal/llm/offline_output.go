package llm

import (
	"regexp"
	"strings"
)

// The offline provider's reading of tool output: which lines of a failure
// say what failed, and which lines at the end of an output state its result.
// Both read the shapes common tools print, not the words of a session.

// offlineLongOutput is the length, in lines, of an output whose summary
// lines are key results.
const offlineLongOutput = 20

// offlineResultChars bounds the summary lines kept of one long output.
const offlineResultChars = 480

var (
	// errorLine matches a line that says what failed, in the shapes of
	// compilers (file:line:col: message; rustc's error[E0502]; kotlinc's
	// "e: "), tracebacks (the closing "KeyError: 'x'"), test runners
	// (pytest's "E   " and FAILED lines, go test's --- FAIL, jest's ●),
	// package managers (npm ERR!) and the words diagnostics are made of.
	errorLine = regexp.MustCompile(`(?i)^(\S+:\d+(:\d+)?:?\s|e: |E\s{2,}|FAILED\b|--- FAIL|FAIL\b|● |npm (ERR!|error)|(fatal )?error(\[\w+\])?:|panic:|fatal:|\w*(Error|Exception|Errno)\b.*:)|\b(error|exception|undefined|unresolved|cannot|can't|could not|couldn't|not found|no such|denied|refused|timed out|mismatch|expected|assert\w*|traceback|panicked)\b`)
	// strongError is an error line that says precisely what failed: a
	// location with a message, a named exception, a compiler's or a
	// package manager's error, a failed assertion.
	strongError = regexp.MustCompile(`(?i)^(\S+:\d+(:\d+)?:?\s|e: |E\s{2,}|npm (ERR!|error)|(fatal )?error(\[\w+\])?:|panic:|\w*(Error|Exception|Errno)\b.*:)|\b(assert\w*|undefined|unresolved|cannot|expected|mismatch)\b`)
	// frameLine is a traceback's location line, context rather than the error.
	frameLine = regexp.MustCompile(`^\s*(File "|at |Traceback \(most recent call last\))`)
	// metricLine is a summary line: a label, then a number (name: 0.91,
	// p(95)=312ms, "Total: 1,204", "12 passed, 1 failed in 3.2s").
	metricLine = regexp.MustCompile(`[\pL)\]][\pL\w()\[\]%./ -]*\s*[:=]\s*[-+~<>]?\d|\b\d[\d,.]*\s*(%|ms|s|kb|mb|gb|kib|mib|rows?|lines?|passed|failed|errors?|warnings?|items?|files?|records?|entries)\b`)
	// leader is a dot leader (name.....: value), with the space before
	// it.
	leader = regexp.MustCompile(`\s*\.{3,}`)
)

// errorText is what a failed call's output says failed: its opening line
// when it is a short status (Exit code 1), then its first error line and
// the first and last that say precisely what failed (strongError), in
// order, each clipped, at most offlineErrorText characters; with no error
// line or a short output (200 characters), the output's beginning. A lone
// status word (FAIL) is not an error line; an indented line continues the
// one before it.
func errorText(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var picked, strong []int
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if !strings.Contains(t, " ") || !errorLine.MatchString(t) || frameLine.MatchString(l) {
			continue
		}
		picked = append(picked, i)
		if strongError.MatchString(t) {
			strong = append(strong, i)
		}
	}
	if whole := clip(out, 201); len(picked) == 0 || len([]rune(whole)) <= 200 {
		return clip(out, 200) // short: the whole output is the error
	}
	keep := []int{picked[0]}
	if len(strong) == 0 {
		strong = picked
	}
	for _, i := range []int{strong[0], strong[len(strong)-1]} {
		if i != keep[len(keep)-1] {
			keep = append(keep, i)
		}
	}
	var parts []string
	if first := strings.TrimSpace(lines[0]); picked[0] != 0 && len(strings.Fields(first)) <= 4 {
		parts = append(parts, first)
	}
	n := 0
	for _, i := range keep {
		l := clip(leader.ReplaceAllString(withContinuation(lines, i), ""), 160)
		if n += len(l) + 3; n > offlineErrorText {
			break
		}
		if !contains(parts, l) {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " | ")
}

// withContinuation is line i with the indented lines that continue it (a
// compiler's "have (…) want (…)"), at most two.
func withContinuation(lines []string, i int) string {
	l := lines[i]
	for j := i + 1; j < len(lines) && j <= i+2; j++ {
		c := lines[j]
		if c == "" || (c[0] != ' ' && c[0] != '\t') || frameLine.MatchString(c) || errorLine.MatchString(strings.TrimSpace(c)) && strongError.MatchString(strings.TrimSpace(c)) {
			break
		}
		l += " " + strings.TrimSpace(c)
	}
	return l
}

// resultLines are the summary lines at the end of a long output: among its
// last 40 lines, those shaped like a metric (metricLine), dot leaders
// dropped, most recent first up to offlineResultChars, returned in order.
func resultLines(out string) []string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var keep []string
	n := 0
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-40; i-- {
		l := strings.Join(strings.Fields(leader.ReplaceAllString(lines[i], "")), " ")
		if !metricLine.MatchString(l) || contains(keep, l) {
			continue
		}
		l = clip(l, 140)
		if n += len(l) + 3; n > offlineResultChars {
			break
		}
		keep = append([]string{l}, keep...)
	}
	return keep
}

// longResult adds to the key results the summary lines of a long output
// (offlineLongOutput lines or more), where a result printed only at its end
// is easily lost: "- `cmd` → line | line", one line per command.
func (d *deriver) longResult(cmd, out string) {
	if strings.Count(out, "\n")+1 < offlineLongOutput {
		return
	}
	lines := resultLines(out)
	if len(lines) == 0 {
		return
	}
	line := "- `" + clip(cmd, 80) + "` → " + strings.Join(lines, " | ")
	if i := indexKey(d.f.results, line, commandKey); i >= 0 {
		d.f.results = append(d.f.results[:i], d.f.results[i+1:]...)
	}
	d.f.results = append(d.f.results, line)
}
