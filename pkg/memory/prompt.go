package memory

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Size limits of a memory document, in estimated tokens (characters/4).
const (
	// MaxSectionTokens is the size above which a section gets a reminder to
	// condense it.
	MaxSectionTokens = 2000
	// MaxTotalTokens is the size above which the whole document gets a
	// CRITICAL reminder.
	MaxTotalTokens = 12000
)

// Prompt variables substituted in extraction prompts.
const (
	VarCurrentNotes = "currentNotes"
	VarNotesPath    = "notesPath"
)

// NotesPath is the path the fork's Edit tool must name for a session's memory
// document.
func NotesPath(tenant, session string) string {
	return fmt.Sprintf("recall://%s/%s/memory.md", tenant, session)
}

// DefaultPrompt is the extraction instruction sent as the last user message
// of the fork. {{notesPath}} and {{currentNotes}} are substituted by
// BuildPrompt.
const DefaultPrompt = `IMPORTANT: this message is not part of the conversation above. It comes from Recall, the note keeper, not from the user. Never mention it, note-taking or these instructions in the notes.

Your only job now is to bring the session notes in {{notesPath}} up to date with everything that happened in the conversation above. You have already read the file; its full current content is:

<current_notes>
{{currentNotes}}
</current_notes>

Change the notes only with the Edit tool on {{notesPath}}, and issue every Edit call you need in parallel, in one single message. Once that message is sent, stop: do not call any other tool and do not write anything else. If the notes already say everything they should, make no Edit call and answer with one short sentence saying so.

Rules for the file:
- Every section starts with a "# " header line followed by an italic description line (a line in _underscores_). Headers and italic descriptions are fixed: never change, move or delete them, and never add a new section.
- The italic description says what belongs in its section. Write only below it, in the section body.
- Leave a section body empty when there is nothing to say yet. Never write placeholders such as "No info yet", "N/A" or "None".
- Be dense and specific: file paths, function names, commands, error messages, numbers and decisions beat narrative. Cut pleasantries and repetition.
- "Key results": when the user asked for a concrete output (an answer, a table, a document, a value), copy it here exactly as given.
- "Current State": always update it so it tells what is being worked on right now, what is still open and the very next step. This is the most important section after a context reset.
- "Errors & Corrections": record what failed, how it was fixed and what the user corrected, so the same mistake is not repeated.
- Nothing said in passing may be lost. Keep, in "Task specification": every preference, standing instruction and constraint the user stated, even as half a sentence inside a longer message about something else ("…, and by the way always use tabs"), and every decision the user confirmed, with its reason, including a proposal the user accepted with a bare "yes" (write out what was proposed, not "the user agreed"). Keep the exact text of every error message (the line that says what failed: the compiler's or the exception's message, the failing test and its assertion), with its fix. Keep results that appear only at the end of a tool's output (a count, a metric, a summary line) in "Key results", as printed.
- Keep each section under about ` + "2000" + ` tokens and the whole file under about ` + "12000" + ` tokens: condense older details instead of letting sections grow.
- Leave out what the agent is given afresh anyway: the system prompt, instruction files (CLAUDE.md, AGENTS.md and the like, and their contents) and earlier summaries of this conversation. Do not copy instruction files into the notes; note only what this session decided or learned beyond them.
- old_string must match the current file exactly once; include enough surrounding text to make it unique.
`

var promptVar = regexp.MustCompile(`\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}`)

// Substitute replaces every {{name}} in text whose name is a key of vars by
// its value, in one pass: substituted values are not scanned again, and
// {{name}} with an unknown name is left as written.
func Substitute(text string, vars map[string]string) string {
	return promptVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-2]
		if v, ok := vars[name]; ok {
			return v
		}
		return m
	})
}

// BuildPrompt returns the extraction prompt for a document: custom (or
// DefaultPrompt when custom is empty) with {{currentNotes}} and {{notesPath}}
// substituted, followed by SizeReminders(notes).
func BuildPrompt(custom, notes, notesPath string) string {
	p := custom
	if strings.TrimSpace(p) == "" {
		p = DefaultPrompt
	}
	p = Substitute(p, map[string]string{VarCurrentNotes: notes, VarNotesPath: notesPath})
	return p + SizeReminders(notes)
}

// SizeReminders returns the text appended to the extraction prompt when notes
// are too large: a CRITICAL reminder when the document exceeds
// MaxTotalTokens, and a list of the sections exceeding MaxSectionTokens,
// largest first. It returns "" when the document is within budget.
func SizeReminders(notes string) string {
	_, sections := Parse(notes)
	type sized struct {
		header string
		tokens int64
	}
	var over []sized
	for _, s := range sections {
		if t := SectionTokens(s); t > MaxSectionTokens {
			over = append(over, sized{s.Header, t})
		}
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].tokens > over[j].tokens })
	total := DocumentTokens(notes)

	var b strings.Builder
	if total > MaxTotalTokens {
		fmt.Fprintf(&b, "\n\nCRITICAL: the notes are about %d tokens, over the limit of %d tokens. "+
			"Shrink the file now: condense the oversized sections, merge related items, drop stale and minor details "+
			"and summarize old worklog entries. Keep \"Current State\" and \"Errors & Corrections\" accurate and complete.",
			total, MaxTotalTokens)
	}
	if len(over) > 0 {
		fmt.Fprintf(&b, "\n\nThese sections are over the limit of %d tokens each; condense them while keeping the essential facts:", MaxSectionTokens)
		for _, s := range over {
			fmt.Fprintf(&b, "\n- %q: about %d tokens", s.header, s.tokens)
		}
	}
	return b.String()
}
