package memory

import "strings"

// DefaultSectionMaxChars is the most characters of a section body a
// compaction summary carries: the reference's 2,000-token section budget at
// 4 characters per token.
const DefaultSectionMaxChars = 8000

// TruncationMarker is the line that replaces the cut part of a section.
const TruncationMarker = "[… the rest of this section was cut to fit the compaction; the full notes stay in Recall …]"

// TruncateForCompact returns notes with every section whose body exceeds
// maxChars characters (UTF-16 code units, as the reference counts) cut at a
// whole line: lines are kept while they fit, then TruncationMarker follows
// on its own line. Headers, description lines and the preamble are never
// cut. truncated reports whether any section was cut. maxChars <= 0 means
// DefaultSectionMaxChars.
//
// A body whose first line alone exceeds maxChars keeps no line, only the
// marker: lines are never split.
func TruncateForCompact(notes string, maxChars int) (out string, truncated bool) {
	if maxChars <= 0 {
		maxChars = DefaultSectionMaxChars
	}
	preamble, sections := Parse(notes)
	var b strings.Builder
	b.Grow(len(notes))
	b.WriteString(preamble)
	for _, s := range sections {
		if utf16Len(s.Body) > maxChars {
			s.Body = cutBody(s.Body, maxChars)
			truncated = true
		}
		b.WriteString(s.Text())
	}
	return b.String(), truncated
}

// cutBody keeps the whole lines of body that fit in maxChars (each line
// counted with its newline) and appends the marker line. A trailing blank
// line separating the section from the next one is kept.
func cutBody(body string, maxChars int) string {
	var b strings.Builder
	used := 0
	for _, line := range strings.SplitAfter(body, "\n") {
		l := strings.TrimSuffix(line, "\n")
		n := utf16Len(l) + 1
		if used+n > maxChars {
			break
		}
		b.WriteString(l)
		b.WriteByte('\n')
		used += n
	}
	b.WriteString(TruncationMarker)
	b.WriteString("\n")
	if strings.HasSuffix(body, "\n\n") {
		b.WriteByte('\n')
	}
	return b.String()
}
