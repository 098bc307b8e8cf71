package llm

import (
	"strings"
	"unicode"
)

// The offline provider's reading of values: which words of a request or an
// edit are specific (a path, a number, a flag, an identifier), what an edit
// or a file write put there, and which value an edit replaced by another.
// Every rule here looks at the shape of text (characters, lines,
// indentation), never at particular words.

// Bounds of what the offline provider copies.
const (
	offlineRequest    = 320  // a request kept whole up to here, else condensed to it
	offlinePlain      = 100  // a request that names nothing specific but paths
	offlineLatest     = 2000 // the latest request, kept whole up to here
	offlineEditChars  = 100  // what one edit put there
	offlineWriteChars = 120  // what one file write holds
	offlineTailChars  = 200  // a command's output lines
	offlineFileEdits  = 2    // edits remembered per file
)

// valueToken reports whether w (a word with surrounding punctuation
// trimmed) is specific: it holds a digit, a path separator or an inner dot
// (file.go), an underscore, a leading dash (--flag), an inner hyphen
// between letters and digits (ORCA-412, word-word), an inner capital
// (camelCase) or is all capitals of two letters or more.
func valueToken(w string) bool {
	if len(w) < 2 {
		return false
	}
	upper, lower := 0, 0
	for i, r := range w {
		switch {
		case unicode.IsDigit(r), r == '/', r == '_':
			return true
		case (r == '.' || r == '-') && i > 0 && i < len(w)-1:
			return true
		case r == '-' && i == 0 && len(w) > 2:
			return true
		case unicode.IsUpper(r):
			upper++
			if i > 0 && lower > 0 {
				return true
			}
		case unicode.IsLower(r):
			lower++
		}
	}
	return upper >= 2 && lower == 0
}

// pathToken reports whether w names a file or directory.
func pathToken(w string) bool {
	return strings.Contains(w, "/") || (strings.Contains(w, ".") && !strings.ContainsAny(w, "()"))
}

// trimWord strips the punctuation around a word of prose.
func trimWord(w string) string {
	return strings.TrimFunc(w, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(".,;:!?()[]{}\"'`“”‘’<>", r)
	})
}

// valueWords returns the specific words of s.
func valueWords(s string) []string {
	var out []string
	for _, f := range strings.Fields(s) {
		if w := trimWord(f); valueToken(w) {
			out = append(out, w)
		}
	}
	return out
}

// plainRequest reports whether a request names nothing specific but
// paths, which the Files section lists anyway: such a request is the first
// to fold out of the Worklog.
func plainRequest(s string) bool {
	for _, w := range valueWords(s) {
		if !pathToken(w) {
			return false
		}
	}
	return true
}

// sentences splits prose into sentences (and list items) at the end of a
// sentence or a line.
func sentences(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		rest := strings.TrimSpace(line)
		for rest != "" {
			loc := sentenceEnd.FindStringIndex(rest)
			if loc == nil {
				out = append(out, rest)
				break
			}
			out = append(out, strings.TrimSpace(rest[:loc[1]]))
			rest = strings.TrimSpace(rest[loc[1]:])
		}
	}
	return out
}

// condenseRequest keeps a request whole up to n characters (whitespace
// collapsed). A longer one keeps its first sentence and then the sentences
// that name something specific, in order, as far as they fit, joined by
// " … ": the values of a long message survive wherever they stand in it.
func condenseRequest(s string, n int) string {
	whole := clip(s, n+1)
	if len([]rune(whole)) <= n {
		return whole
	}
	parts := sentences(s)
	out := clip(parts[0], n/2)
	for _, p := range parts[1:] {
		if len(valueWords(p)) == 0 {
			continue
		}
		p = clip(p, n)
		if len([]rune(out))+3+len([]rune(p)) > n {
			break
		}
		out += " … " + p
	}
	return out
}

// codeLines returns the lines of code that carry content: not blank, not
// a comment, not a lone bracket, not a package clause or an import.
func codeLines(src string) []string {
	var out []string
	inImport := false
	for _, l := range strings.Split(src, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case inImport:
			inImport = t != ")"
			continue
		case t == "import (":
			inImport = true
			continue
		case t == "", strings.HasPrefix(t, "//"), strings.HasPrefix(t, "#"), strings.HasPrefix(t, "/*"), strings.HasPrefix(t, "*"),
			strings.HasPrefix(t, "package "), strings.HasPrefix(t, "import "), strings.Trim(t, "(){}[];,") == "":
			continue
		}
		out = append(out, strings.Join(strings.Fields(t), " "))
	}
	return out
}

// writeSummary condenses a file's whole new content to its declarations:
// its unindented lines (with the lines of a block they open with "(") or,
// when every line is indented, its lines of code.
func writeSummary(content string) string {
	var decls []string
	inBlock := false
	for _, raw := range strings.Split(content, "\n") {
		top := raw != "" && raw[0] != ' ' && raw[0] != '\t'
		if top {
			inBlock = strings.HasSuffix(strings.TrimSpace(raw), "(")
		}
		if top || inBlock {
			decls = append(decls, raw)
		}
	}
	lines := codeLines(strings.Join(decls, "\n"))
	if len(lines) == 0 {
		lines = codeLines(content)
	}
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, " {")
	}
	return clip(strings.Join(lines, "; "), offlineWriteChars)
}

// editSummary condenses what an edit put in a file: its new lines that the
// replaced text did not have, or what it removed when it added nothing.
// top reports that an added line starts unindented (a declaration rather
// than a change inside a body).
func editSummary(oldText, newText string) (summary string, top bool) {
	had := map[string]bool{}
	for _, l := range codeLines(oldText) {
		had[l] = true
	}
	var added []string
	for _, l := range codeLines(newText) {
		if !had[l] {
			added = append(added, l)
			had[l] = true
		}
	}
	if len(added) == 0 {
		if gone := codeLines(oldText); len(gone) > 0 {
			return clip("removed "+strings.Join(gone, "; "), offlineEditChars), false
		}
		return "", false
	}
	for _, raw := range strings.Split(newText, "\n") {
		t := strings.Join(strings.Fields(raw), " ")
		if t != "" && raw[0] != ' ' && raw[0] != '\t' && contains(added, t) {
			top = true
		}
	}
	return clip(strings.Join(added, "; "), offlineEditChars), top
}

// codeTokens splits code into words of value characters (letters, digits
// and _ . / : -); everything else separates them.
func codeTokens(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_./:-", r))
	})
}

// replacedValue finds the value an edit replaced: with the words the old
// and the new text share at both ends set aside, the first differing words
// of each when both remain (at most three words a side) and both are
// specific or a number. A pure insertion or a rewrite replaces no value.
func replacedValue(oldText, newText string) (from, to string, ok bool) {
	a, b := codeTokens(oldText), codeTokens(newText)
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	if len(a) == 0 || len(b) == 0 || len(a) > 3 || len(b) > 3 {
		return "", "", false
	}
	from, to = strings.Trim(a[0], ".:-"), strings.Trim(b[0], ".:-")
	if from == to || len(from) < 3 || !valueToken(from) || !valueToken(to) || valueClass(from) != valueClass(to) {
		return "", "", false
	}
	return from, to, true
}

// valueClass is the shape of a value: a number, a path, an identifier or
// something else (a literal such as 2006-01-02 replaced by the name of a
// constant is not a changed value).
func valueClass(w string) string {
	switch {
	case strings.IndexFunc(w, func(r rune) bool { return !unicode.IsDigit(r) }) < 0:
		return "number"
	case pathToken(w):
		return "path"
	case strings.IndexFunc(w, func(r rune) bool { return !(isAlnum(r) || r == '_') }) < 0 && !unicode.IsDigit(rune(w[0])):
		return "identifier"
	}
	return "other"
}
