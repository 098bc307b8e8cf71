package memory

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Lead-in lines of a condensed summary (CondenseRecords).
const (
	condensedAfterNotes = "Since these notes were last updated the conversation went on; Recall condensed it from the transcript below (no model was used)."
	condensedNoNotes    = "The conversation so far, condensed by Recall from the transcript (no model was used)."
)

// condenseLine is the most characters of one tool call's line.
const condenseLine = 200

// CondenseRecords builds the summary of a full compaction without a model:
// notes (every section cut with TruncateForCompact at DefaultSectionMaxChars)
// followed by msgs, the main-thread messages the notes do not cover,
// condensed by their structure alone:
//
//   - the user's messages verbatim: the text of user messages that carry no
//     tool_result, plumbing wrapped in <…> left out. When not all fit, the
//     newest that fit are shown and a line counts the others;
//   - the tool calls with their outcomes: Bash by its command, other tools
//     by their main argument, each "ok" or "error:" with the first line of
//     the result. When not all fit, the newest are shown and a line counts
//     the others per tool;
//   - the files changed: the file arguments of tools whose name says they
//     edit or write, with those tools.
//
// The text is at most budgetTokens (EstimateText). ok is false when there is
// nothing to condense (no notes, no message with content) or when the notes
// alone do not fit; the text is then "". The notes are never dropped or
// reworded, only section-truncated, and no placeholder stands in for them.
// CondenseRecords does not modify msgs.
func CondenseRecords(notes string, msgs []*events.Message, budgetTokens int64) (string, bool) {
	notes = strings.TrimSpace(notes)
	if notes != "" {
		notes, _ = TruncateForCompact(notes, DefaultSectionMaxChars)
		notes = strings.TrimSpace(notes)
	}
	c := condenseMessages(msgs)
	if notes == "" && c.empty() {
		return "", false
	}
	budget := int(budgetTokens) * 4
	var b strings.Builder
	b.WriteString(notes)
	if c.empty() {
		return fitted(b.String(), budget)
	}
	if notes != "" {
		b.WriteString("\n\n" + condensedAfterNotes + "\n")
	} else {
		b.WriteString(condensedNoNotes + "\n")
	}
	left := budget - utf16Len(b.String())
	if left < 0 {
		return "", false
	}
	// Tool calls and files take at most a third of what is left; the
	// user's own words take the rest.
	tools := c.toolsText(left / 3)
	b.WriteString(c.userText(left - utf16Len(tools)))
	b.WriteString(tools)
	return fitted(strings.TrimRight(b.String(), "\n"), budget)
}

// fitted returns s and true when it holds at most budget characters.
func fitted(s string, budget int) (string, bool) {
	if utf16Len(s) > budget {
		return "", false
	}
	return s, true
}

// condensed is what CondenseRecords reads from the messages.
type condensed struct {
	user  []string
	calls []toolCall
	files []*fileChange
}

// toolCall is one tool call and its outcome.
type toolCall struct {
	name, arg string
	outcome   string // "" while no result was seen
}

// fileChange is a file changed and the tools that changed it.
type fileChange struct {
	path  string
	tools []string
}

func (c *condensed) empty() bool { return len(c.user) == 0 && len(c.calls) == 0 }

// condenseMessages reads the user's messages, the tool calls and their
// outcomes and the files changed from the main-thread messages of msgs.
func condenseMessages(msgs []*events.Message) *condensed {
	c := &condensed{}
	calls := map[string]int{}
	files := map[string]*fileChange{}
	for _, m := range msgs {
		if m == nil || !m.IsMain() {
			continue
		}
		if m.Role == events.RoleUser && !hasToolResult(m.Content) {
			if t := strings.TrimSpace(RequestText(m)); t != "" && !(strings.HasPrefix(t, "<") && strings.HasSuffix(t, ">")) {
				c.user = append(c.user, t)
			}
		}
		for i := range m.Content {
			b := &m.Content[i]
			switch {
			case b.Type == events.BlockToolUse && m.Role == events.RoleAssistant:
				name, arg, path := ToolCallArg(b)
				calls[b.ID] = len(c.calls)
				c.calls = append(c.calls, toolCall{name: name, arg: arg})
				if path != "" && changesFiles(name) {
					c.touch(files, path, name)
				}
			case b.Type == events.BlockToolResult:
				if i, ok := calls[b.ToolUseID]; ok {
					c.calls[i].outcome = outcomeOf(b)
				}
			}
		}
	}
	return c
}

// touch records that tool changed the file at path.
func (c *condensed) touch(files map[string]*fileChange, path, tool string) {
	f := files[path]
	if f == nil {
		f = &fileChange{path: path}
		files[path] = f
		c.files = append(c.files, f)
	}
	for _, t := range f.tools {
		if t == tool {
			return
		}
	}
	f.tools = append(f.tools, tool)
}

// ToolCallArg names a tool_use block: its tool, its main argument (a Bash
// command, else a file path, pattern, URL or query) and the file path it
// names, if any. Names and inputs are read as they are; nothing depends on
// the wording of the conversation.
func ToolCallArg(b *events.Block) (name, arg, path string) {
	var in map[string]any
	_ = json.Unmarshal(b.Input, &in)
	for _, k := range []string{"file_path", "path", "notebook_path"} {
		if s, ok := in[k].(string); ok && s != "" {
			path = s
			break
		}
	}
	arg = path
	for _, k := range []string{"command", "pattern", "url", "query", "description"} {
		if s, ok := in[k].(string); ok && s != "" && (arg == "" || k == "command") {
			arg = s
			break
		}
	}
	return b.Name, arg, path
}

// changesFiles reports whether a tool named name writes the files it names.
func changesFiles(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "edit") || strings.Contains(n, "write") || strings.Contains(n, "create")
}

func hasToolResult(c events.Content) bool {
	for i := range c {
		if c[i].Type == events.BlockToolResult {
			return true
		}
	}
	return false
}

// outcomeOf is "ok" or "error: " and the first non-blank line of a result.
func outcomeOf(b *events.Block) string {
	if !b.IsError {
		return "ok"
	}
	for i := range b.Content {
		for _, l := range strings.Split(b.Content[i].Text, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				return "error: " + l
			}
		}
	}
	return "error"
}

// userText renders the user's messages verbatim within max characters:
// the newest that fit, in their order, and a line counting the others.
func (c *condensed) userText(max int) string {
	if len(c.user) == 0 {
		return ""
	}
	const head = "\nThe user's messages, verbatim, oldest first:\n"
	left := max - utf16Len(head) - 80 // room for the line counting the others
	shown := make([]string, len(c.user))
	n := 0
	for i := len(c.user) - 1; i >= 0; i-- {
		r := "\n> " + strings.ReplaceAll(c.user[i], "\n", "\n> ") + "\n"
		if l := utf16Len(r); l <= left {
			shown[i], left, n = r, left-l, n+1
		}
	}
	if n == 0 {
		return fmt.Sprintf("\n(%d messages from the user are too long to show here; the full transcript holds them.)\n", len(c.user))
	}
	var b strings.Builder
	b.WriteString(head)
	for _, r := range shown {
		b.WriteString(r)
	}
	if hidden := len(c.user) - n; hidden > 0 {
		fmt.Fprintf(&b, "\n(%d other messages from the user are too long to show here; the full transcript holds them.)\n", hidden)
	}
	return b.String()
}

// toolsText renders the files changed and the tool calls with their
// outcomes within max characters: every file that fits, the newest calls
// that fit and a line counting the others per tool; "" when there were no
// tool calls or nothing fits.
func (c *condensed) toolsText(max int) string {
	if len(c.calls) == 0 {
		return ""
	}
	var files strings.Builder
	if len(c.files) > 0 {
		files.WriteString("\nFiles changed:\n")
		for i, f := range c.files {
			l := "- `" + f.path + "` (" + strings.Join(f.tools, ", ") + ")\n"
			if utf16Len(files.String())+utf16Len(l) > max/3 {
				fmt.Fprintf(&files, "- … and %d more files\n", len(c.files)-i)
				break
			}
			files.WriteString(l)
		}
	}
	head := fmt.Sprintf("\nTool calls and their outcomes (%d, oldest first):\n", len(c.calls))
	left := max - utf16Len(files.String()) - utf16Len(head) - 200 // the line counting the others
	first := len(c.calls)
	for first > 0 {
		l := utf16Len(c.calls[first-1].line())
		if l > left {
			break
		}
		left -= l
		first--
	}
	if first == len(c.calls) || left < 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(head)
	if first > 0 {
		b.WriteString("- … " + foldCount(c.calls[:first]) + " not listed\n")
	}
	for _, tc := range c.calls[first:] {
		b.WriteString(tc.line())
	}
	b.WriteString(files.String())
	return b.String()
}

// line is the call's line: tool, argument, outcome.
func (tc toolCall) line() string {
	l := tc.name
	if tc.arg != "" {
		l += " `" + strings.Join(strings.Fields(tc.arg), " ") + "`"
	}
	out := tc.outcome
	if out == "" {
		out = "no result recorded"
	}
	return clipUnits("- "+l+" → "+out, condenseLine) + "\n"
}

// foldCount says how many calls there were in all and per tool, the most
// frequent tools first: "37 earlier tool calls (Bash×30, Read×7)".
func foldCount(calls []toolCall) string {
	per := map[string]int{}
	for _, tc := range calls {
		per[tc.name]++
	}
	names := make([]string, 0, len(per))
	for n := range per {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if per[names[i]] != per[names[j]] {
			return per[names[i]] > per[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s×%d", n, per[n]))
	}
	return fmt.Sprintf("%d earlier tool calls (%s)", len(calls), strings.Join(parts, ", "))
}

// clipUnits cuts s to at most n runes, ending with "…" when cut.
func clipUnits(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
