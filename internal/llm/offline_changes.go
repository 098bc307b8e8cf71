package llm

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
)

// change is a value an edit replaced by another: a path, a port, a flag, a
// name that a later request changed and the agent then changed in a file.
type change struct{ from, to string }

// changeLine is how Errors & Corrections records a change; the next
// extraction reads it back from the notes.
var changeLine = regexp.MustCompile("(?m)^- Changed `([^`]+)` → `([^`]+)`")

func (c change) line() string {
	return "- Changed `" + c.from + "` → `" + c.to + "`"
}

// notesChanges reads the changes recorded in notes.
func notesChanges(notes string) []change {
	var out []change
	for _, m := range changeLine.FindAllStringSubmatch(notes, -1) {
		out = append(out, change{m[1], m[2]})
	}
	return out
}

// finalValues maps every replaced value to the value that holds now,
// following chains (a → b, then b → c: a and b map to c); a value changed
// back to one it replaced maps to nothing.
func finalValues(changes []change) map[string]string {
	next := map[string]string{}
	for _, c := range changes {
		next[c.from] = c.to
		delete(next, c.to) // changed back: the latest value holds
	}
	out := map[string]string{}
	for from := range next {
		to, seen := from, map[string]bool{from: true}
		for {
			n, ok := next[to]
			if !ok || seen[n] {
				break
			}
			seen[n], to = true, n
		}
		if to != from {
			out[from] = to
		}
	}
	return out
}

// annotate marks every mention of a replaced value in text with the value
// that holds now, "old (→ new)", unless the mention already points at a
// replacement: the notes never state a superseded value without saying it
// was superseded. Values are matched as whole words of value characters.
func annotate(text string, finals map[string]string) string {
	for from, to := range finals {
		var b strings.Builder
		rest := text
		for {
			i := wordIndex(rest, from)
			if i < 0 {
				break
			}
			end := i + len(from)
			b.WriteString(rest[:end])
			if !pointsOn(rest[end:], to) {
				b.WriteString(" (→ " + to + ")")
			}
			rest = rest[end:]
		}
		b.WriteString(rest)
		text = b.String()
	}
	return text
}

// wordIndex is the index of the first occurrence of w in s that is a
// whole word of value characters, or -1.
func wordIndex(s, w string) int {
	for off := 0; ; {
		i := strings.Index(s[off:], w)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(w)
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[end:])
		next, _ := utf8.DecodeRuneInString(strings.TrimLeft(s[end:], ".-"))
		if (i == 0 || !valueRune(before)) && (end == len(s) || !valueRune(after) || (strings.ContainsRune(".-", after) && !isAlnum(next))) {
			return i
		}
		off = i + 1
	}
}

func valueRune(r rune) bool { return isAlnum(r) || strings.ContainsRune("_./-", r) }

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// pointsOn reports whether the text after a value already names a
// replacement: " (→ …)", or "` → `to`" as a change line has it.
func pointsOn(after, to string) bool {
	after = strings.TrimLeft(after, "`\"'")
	after = strings.TrimLeft(after, " ")
	return strings.HasPrefix(after, "(→ ") || strings.HasPrefix(strings.TrimLeft(strings.TrimPrefix(after, "→ "), "`\"'"), to) && strings.HasPrefix(after, "→ ")
}

// fileEdit is what a tool call that writes a file put there.
type fileEdit struct {
	summary string // condensed new content
	write   bool   // a whole file was written
	top     bool   // an edit added an unindented line (editSummary)
	changes []change
}

// readEdit reads the input of a tool call that writes a file: Write's
// content, Edit's old and new strings, MultiEdit's edits. ok is false for
// other calls.
func readEdit(b *events.Block) (fe fileEdit, ok bool) {
	var in struct {
		Content   *string `json:"content"`
		OldString *string `json:"old_string"`
		NewString *string `json:"new_string"`
		NewSource *string `json:"new_source"`
		Edits     []struct {
			OldString string `json:"old_string"`
			NewString string `json:"new_string"`
		} `json:"edits"`
	}
	if json.Unmarshal(b.Input, &in) != nil {
		return fe, false
	}
	switch {
	case in.NewString != nil:
		old := ""
		if in.OldString != nil {
			old = *in.OldString
		}
		in.Edits = append(in.Edits, struct {
			OldString string `json:"old_string"`
			NewString string `json:"new_string"`
		}{old, *in.NewString})
	case in.Content != nil:
		return fileEdit{summary: writeSummary(*in.Content), write: true}, true
	case in.NewSource != nil:
		return fileEdit{summary: writeSummary(*in.NewSource), write: true}, true
	}
	if len(in.Edits) == 0 {
		return fe, false
	}
	var parts []string
	for _, e := range in.Edits {
		if s, top := editSummary(e.OldString, e.NewString); s != "" {
			parts = append(parts, s)
			fe.top = fe.top || top
		}
		if from, to, ok := replacedValue(e.OldString, e.NewString); ok {
			fe.changes = append(fe.changes, change{from, to})
		}
	}
	fe.summary = clip(strings.Join(parts, "; "), offlineEditChars)
	return fe, true
}

// outputTail is the part of a command's output that carries its result:
// its last lines, in order, as many as fit in offlineTailChars, each
// clipped (dot leaders collapsed). A lone word (a status) is left out, and so is a line shaped
// like one kept already (same first two words, digits aside): a run of
// similar lines shows once, by its last.
func outputTail(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var keep []string
	shapes := map[string]bool{}
	n := 0
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-40; i-- {
		l := strings.Join(strings.Fields(leader.ReplaceAllString(lines[i], "")), " ")
		shape := lineShape(l)
		if l == "" || !strings.Contains(l, " ") && len(l) <= 8 || shapes[shape] {
			continue
		}
		l = clip(l, 90)
		if n += len(l) + 3; n > offlineTailChars {
			break
		}
		shapes[shape] = true
		keep = append([]string{l}, keep...)
	}
	return strings.Join(keep, " | ")
}

// lineShape is a line's first two words with digits taken out.
func lineShape(l string) string {
	f := strings.Fields(l)
	if len(f) > 2 {
		f = f[:2]
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return -1
		}
		return r
	}, strings.Join(f, " "))
}
