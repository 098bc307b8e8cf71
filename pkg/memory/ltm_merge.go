package memory

import (
	"strings"
	"unicode"
)

// NearDuplicate is how alike two memory lines must be — the share of
// their distinct words they have in common (Jaccard) — for the newer to
// replace the older: the same statement said again, or a recurring
// trajectory, is kept once, as last said.
const NearDuplicate = 0.8

// mergeLine is one line of a memory document with what merging compares.
type mergeLine struct {
	text    string
	norm    string          // normLine
	words   map[string]bool // its distinct lower-case words
	clauses map[string]string
}

func newMergeLine(text string) mergeLine {
	l := mergeLine{text: text, norm: normLine(text), words: map[string]bool{}}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), notWordRune) {
		l.words[w] = true
	}
	l.clauses = valueClauses(text)
	return l
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// replaces reports whether l, said later, makes old stale: the same line,
// a near duplicate of it, or a clause of old said again with another value
// (superseded: "fixtures belong in testdata/a" by "fixtures belong in
// testdata/b", whatever the rest of either sentence says).
func (l mergeLine) replaces(old mergeLine) bool {
	if l.norm == old.norm || jaccard(l.words, old.words) >= NearDuplicate {
		return true
	}
	for shape, v := range l.clauses {
		if ov, ok := old.clauses[shape]; ok && ov != v {
			return true
		}
	}
	return false
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	both := 0
	for w := range a {
		if b[w] {
			both++
		}
	}
	return float64(both) / float64(len(a)+len(b)-both)
}

// valueClauses maps the shape of each clause of text that states one value
// — the clause's words with the value replaced by "<v>", at least three
// words besides it — to that value. Clauses end at , ; : — – ( ) and at a
// sentence's end; a value is a token holding a digit, / _ @ . inside or
// backticks, or an upper-case word of two letters or more.
func valueClauses(text string) map[string]string {
	out := map[string]string{}
	for _, c := range strings.FieldsFunc(text, isClauseBreak) {
		var shape []string
		value, words := "", 0
		for _, tok := range strings.Fields(c) {
			t := strings.Trim(tok, ".!?\"'")
			switch {
			case t == "":
			case isValue(t):
				if value != "" {
					value = "\x00" // two values: not one statement of one
				} else {
					value = strings.Trim(t, "`")
				}
				shape = append(shape, "<v>")
			default:
				shape = append(shape, strings.ToLower(t))
				words++
			}
		}
		if value != "" && value != "\x00" && words >= 3 {
			out[strings.Join(shape, " ")] = strings.ToLower(value)
		}
	}
	return out
}

func isClauseBreak(r rune) bool {
	switch r {
	case ',', ';', ':', '—', '–', '(', ')', '\n':
		return true
	}
	return false
}

func isValue(t string) bool {
	if strings.HasPrefix(t, "`") && strings.HasSuffix(t, "`") && len(t) > 2 {
		return true
	}
	upper := 0
	for i, r := range t {
		switch {
		case unicode.IsDigit(r), r == '/', r == '_', r == '@':
			return true
		case r == '.' && i > 0 && i < len(t)-1:
			return true
		case unicode.IsUpper(r):
			upper++
		case unicode.IsLetter(r):
			upper = -len(t) // a lower-case letter: not an upper-case word
		}
	}
	return upper >= 2
}
