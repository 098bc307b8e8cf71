package memory

import "strings"

// DefaultTemplate is the reference's 10-section session memory template. Each
// section is a "# " header line followed by an italic description line; the
// extractor fills in the text below the description and never changes either.
const DefaultTemplate = `# Session Title
_A short and distinctive 5-10 word descriptive title for the session. Super info dense, no filler_

# Current State
_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._

# Task specification
_What did the user ask to build? Any design decisions or other explanatory context_

# Files and Functions
_What are the important files? In short, what do they contain and why are they relevant?_

# Workflow
_What bash commands are usually run and in what order? How to interpret their output if not obvious?_

# Errors & Corrections
_Errors encountered and how they were fixed. What did the user correct? What approaches failed and should not be tried again?_

# Codebase and System Documentation
_What are the important system components? How do they work/fit together?_

# Learnings
_What has worked well? What has not? What to avoid? Do not duplicate items from other sections_

# Key results
_If the user asked a specific output such as an answer, table, or document, repeat the exact result here_

# Worklog
_Step by step, what was attempted, done? Very terse summary for each step_
`

// Section is one "# " section of a memory document.
type Section struct {
	// Header is the header line without the leading "# ".
	Header string
	// Description is the italic description line ("_..._"), if the line
	// after the header is one; empty otherwise.
	Description string
	// Body is everything after the header (and description) up to the next
	// header, as written.
	Body string
}

// Text is the section as it appears in the document.
func (s Section) Text() string {
	var b strings.Builder
	b.WriteString("# ")
	b.WriteString(s.Header)
	b.WriteByte('\n')
	if s.Description != "" {
		b.WriteString(s.Description)
		b.WriteByte('\n')
	}
	b.WriteString(s.Body)
	return b.String()
}

// Parse splits a memory document into its preamble (text before the first
// header, usually empty) and its sections. Sections start at lines beginning
// with "# "; "## " and deeper headers are body text, and so is a "# " line
// inside a fenced code block (``` or ~~~, as CommonMark fences them: a shell
// comment in a Workflow snippet is not a section). Indented code cannot hold
// a header: a header line starts at its first column. Joining the preamble
// and every section's Text reproduces doc exactly.
func Parse(doc string) (preamble string, sections []Section) {
	lines := strings.SplitAfter(doc, "\n")
	cur := -1
	var fence codeFence
	var body strings.Builder
	flush := func() {
		if cur >= 0 {
			sections[cur].Body = body.String()
		} else {
			preamble = body.String()
		}
		body.Reset()
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if fence.track(line) {
			body.WriteString(line)
			continue
		}
		if IsHeaderLine(line) {
			flush()
			sections = append(sections, Section{Header: strings.TrimSuffix(strings.TrimPrefix(line, "# "), "\n")})
			cur = len(sections) - 1
			if !strings.HasSuffix(line, "\n") {
				// A header on the last line without newline: Text adds one.
				continue
			}
			if i+1 < len(lines) && IsDescriptionLine(lines[i+1]) {
				sections[cur].Description = strings.TrimSuffix(lines[i+1], "\n")
				i++
			}
			continue
		}
		body.WriteString(line)
	}
	flush()
	return preamble, sections
}

// codeFence follows CommonMark fenced code blocks line by line.
type codeFence struct {
	char byte // '`' or '~' while a fence is open, 0 otherwise
	n    int  // the opening fence's length
}

// track reports whether line is part of a fenced code block (its opening
// and closing fence lines included) and updates the state.
func (f *codeFence) track(line string) bool {
	l := strings.TrimRight(line, "\r\n")
	indent := len(l) - len(strings.TrimLeft(l, " "))
	if indent > 3 {
		return f.char != 0
	}
	l = l[indent:]
	run := 0
	for run < len(l) && (l[run] == '`' || l[run] == '~') && l[run] == l[0] {
		run++
	}
	if f.char != 0 {
		if run >= f.n && l[0] == f.char && strings.TrimSpace(l[run:]) == "" {
			f.char = 0
		}
		return true
	}
	if run >= 3 && !(l[0] == '`' && strings.Contains(l[run:], "`")) {
		f.char, f.n = l[0], run
		return true
	}
	return false
}

// IsHeaderLine reports whether line (with or without its newline) is a
// top-level "# " header.
func IsHeaderLine(line string) bool { return strings.HasPrefix(line, "# ") }

// IsDescriptionLine reports whether line is an italic description line:
// "_..._" on its own line.
func IsDescriptionLine(line string) bool {
	l := strings.TrimRight(line, "\r\n")
	return len(l) >= 2 && l[0] == '_' && l[len(l)-1] == '_'
}

// SectionTokens estimates a section's size as the reference does: the
// characters of its whole text (header included) / 4.
func SectionTokens(s Section) int64 { return EstimateText(s.Text()) }

// DocumentTokens estimates a whole document's size (characters / 4).
func DocumentTokens(doc string) int64 { return EstimateText(doc) }

// IsEmptyTemplate reports whether doc is still the unfilled template
// (compared with surrounding whitespace trimmed).
func IsEmptyTemplate(doc, template string) bool {
	return strings.TrimSpace(doc) == strings.TrimSpace(template)
}
