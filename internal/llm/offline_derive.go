package llm

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// facts is what the offline provider reads from a conversation. Lists and
// counts hold only what came after the last tool call the notes already
// counted (the notes' tally marker), so a window that overlaps the previous
// extraction's adds nothing twice.
type facts struct {
	firstRequest  string
	latestRequest string
	latestReply   string
	files         []string // "- `path` — Tool, Tool | edit: …"
	commands      []string // "- `cmd` → ok: output tail"
	errors        []string // failures with what resolved them, changes
	changes       []change
	results       []string
	said          []string // standing instructions and confirmed proposals
	worklog       []turnTally
	// marker is the id of the newest tool call counted ("" when the
	// conversation holds none).
	marker string
}

// turnTally is a user turn's worklog entry: its request ("" when the
// conversation continues a turn whose request it does not show) and the
// tool calls it made that were not counted before.
type turnTally struct {
	request string
	counts  tally
}

// statement matches agent text worth keeping as a key result: a decision,
// a fix, or a claim with a number in it.
var statement = regexp.MustCompile(`(?i)^(decision|decided|fixed|found|result)\b|\b(decided|we will use|going with)\b|\d`)

var sentenceEnd = regexp.MustCompile(`[.?!:](\s|$)`)

// derive reads the facts of msgs. since is the id of the newest tool call
// the notes already counted: blocks up to it add no file, command, error,
// result or count. When since is "" or not among msgs (the conversation
// starts after it), everything counts.
func derive(msgs []events.Message, since string) facts {
	d := &deriver{fileIdx: map[string]*fileUse{}, tools: map[string]toolRef{}, old: map[string]bool{}, pendingFix: -1}
	d.counting = since == "" || !holdsToolUse(msgs, since)
	d.since = since
	for i := range msgs {
		m := &msgs[i]
		for j := range m.Content {
			b := &m.Content[j]
			switch {
			case m.Role == events.RoleUser && b.Type == events.BlockText:
				d.userText(b.Text)
			case m.Role == events.RoleAssistant && b.Type == events.BlockText:
				d.assistantText(b.Text)
			case b.Type == events.BlockToolUse:
				d.toolUse(b)
			case b.Type == events.BlockToolResult && b.IsError:
				d.toolError(b)
			case b.Type == events.BlockToolResult:
				d.toolResult(b)
			}
		}
	}
	d.endTurn()
	for _, fu := range d.files {
		d.f.files = append(d.f.files, fu.line())
	}
	return d.f
}

func holdsToolUse(msgs []events.Message, id string) bool {
	for i := range msgs {
		for j := range msgs[i].Content {
			if b := &msgs[i].Content[j]; b.Type == events.BlockToolUse && b.ID == id {
				return true
			}
		}
	}
	return false
}

// fileUse is a file the conversation touched, the tools that did and what
// its writes and edits put there.
type fileUse struct {
	path  string
	tools []string
	edits []string
}

func (fu *fileUse) line() string {
	l := "- `" + fu.path + "` — " + strings.Join(fu.tools, ", ")
	for _, e := range fu.edits {
		l += " | " + e
	}
	return l
}

// toolRef names a tool use: its tool and its main argument.
type toolRef struct{ name, arg string }

// deriver accumulates facts over a conversation, block by block.
type deriver struct {
	f       facts
	files   []*fileUse
	fileIdx map[string]*fileUse
	tools   map[string]toolRef
	old     map[string]bool // tool calls the notes counted already

	since    string
	counting bool // past the notes' tally marker

	turn       turnTally
	turnNew    bool // the turn started past the marker
	inTurn     bool
	pendingFix int    // index in f.errors of an error whose fix is not named yet
	pendingOld string // an error the notes may hold without its fix
	fixWords   bool   // the agent's words after the error are noted
}

// endTurn writes the worklog entry of the turn in progress: a turn that
// started past the marker, or one that made tool calls past it.
func (d *deriver) endTurn() {
	if (d.inTurn && d.turnNew) || d.turn.counts.total() > 0 {
		d.f.worklog = append(d.f.worklog, d.turn)
	}
	d.turn, d.inTurn, d.turnNew = turnTally{}, false, false
}

// userText starts a turn with a user request (corrections noted).
func (d *deriver) userText(raw string) {
	text := strings.TrimSpace(raw)
	if isWrapper(text) {
		return
	}
	d.endTurn()
	if d.counting {
		d.passing(text)
	}
	if d.f.firstRequest == "" {
		d.f.firstRequest = text
	}
	d.f.latestRequest, d.f.latestReply = text, ""
	d.turn.request, d.inTurn, d.turnNew = workRequest(text), true, d.counting
	d.pendingFix, d.pendingOld, d.fixWords = -1, "", false
}

// workRequest is a request as the Worklog keeps it: condensed to
// offlineRequest characters when it names something specific, else (its
// paths aside) clipped to offlinePlain.
func workRequest(text string) string {
	if plainRequest(text) {
		return clip(text, offlinePlain)
	}
	return condenseRequest(text, offlineRequest)
}

// assistantText notes the agent's words: the latest reply, the fix of the
// last error, a key result.
func (d *deriver) assistantText(raw string) {
	t := strings.TrimSpace(raw)
	if t == "" {
		return
	}
	d.f.latestReply = t
	if !d.fixWords {
		d.resolve(clip(t, offlineLine), false)
		d.fixWords = true
	}
	if d.counting && statement.MatchString(t) {
		d.f.results = append(d.f.results, "- "+clip(t, offlineLine))
	}
}

// toolUse notes the files, edits and commands of a tool call past the
// marker and counts it for its turn; the marker's own call turns counting
// on. An edit or a write resolves the last failure.
func (d *deriver) toolUse(b *events.Block) {
	name, arg, path := memory.ToolCallArg(b)
	if name != "Bash" {
		arg = path
	}
	d.tools[b.ID] = toolRef{name, arg}
	if !d.counting {
		d.old[b.ID] = true
		d.counting = b.ID == d.since
		return
	}
	d.f.marker = b.ID
	if path != "" {
		d.touch(path, name)
		if fe, ok := readEdit(b); ok {
			d.edited(name, path, fe)
		}
	}
	if cmd := arg; cmd != "" && name == "Bash" {
		line := "- `" + clip(cmd, offlineLine) + "`"
		if i := indexKey(d.f.commands, line, commandKey); i >= 0 {
			d.f.commands = append(d.f.commands[:i], d.f.commands[i+1:]...)
		}
		d.f.commands = append(d.f.commands, line)
	}
	d.turn.counts.add(name, 1)
}

// edited notes what a write or an edit put in the file at path: its
// summary in the file's line, the values it replaced, and, after a
// failure, the fix.
func (d *deriver) edited(tool, path string, fe fileEdit) {
	fu := d.fileIdx[path]
	if fe.summary != "" {
		kind := "edit: "
		switch {
		case fe.write:
			kind = "wrote: "
		case fe.top:
			kind = "added: "
		}
		fu.edits = keepEdits(append(fu.edits, kind+fe.summary))
		d.resolve(tool+" `"+path+"`: "+fe.summary, true)
	}
	for _, c := range fe.changes {
		d.f.changes = append(d.f.changes, c)
		d.f.errors = append(d.f.errors, c.line())
	}
}

// resolve adds what followed the last failure to its line: the agent's
// first words, then the edit or command that fixed it (done).
func (d *deriver) resolve(what string, done bool) {
	switch {
	case d.pendingFix >= 0:
		d.f.errors[d.pendingFix] += " → " + what
	case d.pendingOld != "" && d.counting:
		// The error was counted before, its fix comes now.
		d.f.errors = append(d.f.errors, d.pendingOld+" → "+what)
		d.pendingFix, d.pendingOld = len(d.f.errors)-1, ""
	default:
		return
	}
	if done {
		d.pendingFix, d.pendingOld = -1, ""
	}
}

// toolResult notes a command's result: its exit status and the lines of
// its output that carry the result. A command that succeeds after a
// failure resolves it.
func (d *deriver) toolResult(b *events.Block) {
	ref := d.tools[b.ToolUseID]
	if ref.name != "Bash" || d.old[b.ToolUseID] || !d.counting {
		return
	}
	key := "- `" + clip(ref.arg, offlineLine) + "`"
	tail := outputTail(resultText(b))
	if i := indexKey(d.f.commands, key, commandKey); i >= 0 {
		d.f.commands[i] = key + " → ok"
		if tail != "" && tail != "(no output)" {
			d.f.commands[i] += ": " + tail
		}
	}
	d.resolve("`"+clip(ref.arg, 60)+"` then passed", true)
	d.longResult(ref.arg, resultText(b))
}

// touch records that tool used the file at path.
func (d *deriver) touch(path, tool string) {
	fu := d.fileIdx[path]
	if fu == nil {
		fu = &fileUse{path: path}
		d.fileIdx[path] = fu
		d.files = append(d.files, fu)
	}
	if !contains(fu.tools, tool) {
		fu.tools = append(fu.tools, tool)
	}
}

// toolError records a failed tool result; what follows it until the next
// request (the agent's words, the edit or command that fixed it) is added
// to its line. The error of a call the notes counted is only remembered,
// in case its fix comes past the marker.
func (d *deriver) toolError(b *events.Block) {
	ref := d.tools[b.ToolUseID]
	name := ref.name
	if name == "" {
		name = "tool"
	}
	line := "- " + name
	if ref.arg != "" {
		line += " `" + clip(ref.arg, 60) + "`"
	}
	line += " failed: " + errorText(resultText(b))
	d.fixWords = false
	if d.old[b.ToolUseID] {
		d.pendingFix, d.pendingOld = -1, line
		return
	}
	if i := indexKey(d.f.commands, "- `"+clip(ref.arg, offlineLine)+"`", commandKey); i >= 0 && name == "Bash" {
		d.f.commands[i] = commandKey(d.f.commands[i]) + " → failed"
	}
	d.f.errors = append(d.f.errors, line)
	d.pendingFix, d.pendingOld = len(d.f.errors)-1, ""
}

// isWrapper reports user text that is plumbing rather than a request:
// command wrappers and system reminders (<...>), markers such as
// "[Request interrupted by user]" or the extraction's own note about omitted
// messages ([...]).
func isWrapper(s string) bool {
	return s == "" || (strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">")) ||
		(strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"))
}

func resultText(b *events.Block) string {
	for i := range b.Content {
		if b.Content[i].Type == events.BlockText && strings.TrimSpace(b.Content[i].Text) != "" {
			return b.Content[i].Text
		}
	}
	return "(no output)"
}

// indexKey is the index of the line of list with the key of line, or -1.
func indexKey(list []string, line string, key func(string) string) int {
	k := key(line)
	for i, l := range list {
		if key(l) == k {
			return i
		}
	}
	return -1
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// clip collapses whitespace and cuts s to at most n runes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
