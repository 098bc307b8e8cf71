package llm

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// tally counts tool calls per tool, tools in the order of their first call.
// The zero value is empty and ready to use.
type tally struct {
	names []string
	n     map[string]int
}

// add counts n calls of tool.
func (t *tally) add(tool string, n int) {
	if t.n == nil {
		t.n = map[string]int{}
	}
	if _, ok := t.n[tool]; !ok {
		t.names = append(t.names, tool)
	}
	t.n[tool] += n
}

// merge counts every call of o.
func (t *tally) merge(o tally) {
	for _, name := range o.names {
		t.add(name, o.n[name])
	}
}

func (t tally) total() int {
	n := 0
	for _, c := range t.n {
		n += c
	}
	return n
}

// String is "replied" for no calls, else each tool by its first call:
// "Read, Bash×3" (a single call is the tool's name alone).
func (t tally) String() string {
	if t.total() == 0 {
		return "replied"
	}
	parts := make([]string, 0, len(t.names))
	for _, name := range t.names {
		if c := t.n[name]; c > 1 {
			parts = append(parts, fmt.Sprintf("%s×%d", name, c))
		} else {
			parts = append(parts, name)
		}
	}
	return strings.Join(parts, ", ")
}

var (
	toolCount    = regexp.MustCompile(`^(\S+)×(\d+)$`)
	worklogFold  = regexp.MustCompile(`^- … (\d+) earlier requests → (.*)$`)
	continuedKey = "(a request before this part of the conversation)"
)

// parseTally reads a tally written by String; ok is false for text that is
// not one (a line a model wrote, say).
func parseTally(s string) (t tally, ok bool) {
	s = strings.TrimSpace(s)
	if s == "replied" {
		return t, true
	}
	for _, p := range strings.Split(s, ", ") {
		if m := toolCount.FindStringSubmatch(p); m != nil {
			n, _ := strconv.Atoi(m[2])
			t.add(m[1], n)
			continue
		}
		if p == "" || strings.ContainsAny(p, " \t`") {
			return tally{}, false
		}
		t.add(p, 1)
	}
	return t, true
}

// worklogLine is one line of the Worklog: a request and its tool calls, or
// a line the offline provider did not write (raw, kept as it is).
type worklogLine struct {
	request string
	counts  tally
	raw     string
}

func (l worklogLine) String() string {
	if l.raw != "" {
		return l.raw
	}
	return "- " + l.request + " → " + l.counts.String()
}

// worklog is the Worklog section as the offline provider keeps it: a fold
// line counting the requests and tool calls of the lines it no longer
// shows, one line per request, and the tally marker.
type worklog struct {
	folded      int
	foldedCalls tally
	lines       []worklogLine
}

func parseWorklog(body string) worklog {
	var w worklog
	for _, l := range strings.Split(tallyMarker.ReplaceAllString(body, ""), "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if m := worklogFold.FindStringSubmatch(l); m != nil {
			if t, ok := parseTally(m[2]); ok {
				n, _ := strconv.Atoi(m[1])
				w.folded += n
				w.foldedCalls.merge(t)
				continue
			}
		}
		w.lines = append(w.lines, parseWorklogLine(l))
	}
	return w
}

func parseWorklogLine(l string) worklogLine {
	if i := strings.LastIndex(l, " → "); i > 0 && strings.HasPrefix(l, "- ") {
		if t, ok := parseTally(l[i+len(" → "):]); ok {
			return worklogLine{request: l[2:i], counts: t}
		}
	}
	return worklogLine{raw: l}
}

// mergeWorklog adds the turns of f to the Worklog body old: a turn whose
// request has a line already adds its calls to that line (which moves to
// the end), a turn the conversation shows without its request adds them to
// the newest line, others get a new line. Past offlineMaxWorklog lines (or
// offlineSectionChars characters) the oldest lines are folded into the
// first line, which keeps their counts; the tally marker ends the body.
func mergeWorklog(old string, f facts) string {
	w := parseWorklog(old)
	for _, t := range f.worklog {
		w.add(t)
	}
	for len(w.lines) > 1 && (len(w.lines) > offlineMaxWorklog || w.length() > offlineSectionChars) {
		i := w.foldable()
		w.folded++
		w.foldedCalls.merge(w.lines[i].counts)
		w.lines = append(w.lines[:i], w.lines[i+1:]...)
	}
	var out []string
	if w.folded > 0 {
		out = append(out, fmt.Sprintf("- … %d earlier requests → %s", w.folded, w.foldedCalls))
	}
	for _, l := range w.lines {
		out = append(out, l.String())
	}
	marker := f.marker
	if marker == "" {
		marker = notesMarker(old)
	}
	if marker != "" {
		out = append(out, markerLine(marker))
	}
	return strings.Join(out, "\n")
}

// add merges one turn into the worklog.
func (w *worklog) add(t turnTally) {
	if t.request == "" {
		if n := len(w.lines); n > 0 && w.lines[n-1].raw == "" {
			w.lines[n-1].counts.merge(t.counts)
			return
		}
		t.request = continuedKey
	}
	line := worklogLine{request: t.request}
	for i, l := range w.lines {
		if l.raw == "" && stripChanges(l.request) == stripChanges(t.request) {
			line.counts.merge(l.counts)
			w.lines = append(w.lines[:i], w.lines[i+1:]...)
			break
		}
	}
	line.counts.merge(t.counts)
	w.lines = append(w.lines, line)
}

// foldable is the line to fold first: the oldest line whose request
// names nothing specific but paths (plainRequest), else the oldest; never
// the newest.
func (w *worklog) foldable() int {
	for i, l := range w.lines[:len(w.lines)-1] {
		if l.raw == "" && plainRequest(stripChanges(l.request)) {
			return i
		}
	}
	return 0
}

// stripChanges removes what annotate added to a text, " (→ new)", so a
// request annotated in the notes keys the same as it reads in the
// conversation.
func stripChanges(s string) string {
	for {
		i := strings.Index(s, " (→ ")
		if i < 0 {
			return s
		}
		depth, end := 0, len(s)
		for j := i + 1; j < len(s); j++ {
			if s[j] == '(' {
				depth++
			} else if s[j] == ')' {
				if depth--; depth == 0 {
					end = j + 1
					break
				}
			}
		}
		s = s[:i] + s[end:]
	}
}

func (w *worklog) length() int {
	n := 0
	for _, l := range w.lines {
		n += len(l.String()) + 1
	}
	return n
}
