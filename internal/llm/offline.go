package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// OfflineModel is the model name the offline provider reports.
const OfflineModel = "offline-v1"

// Bounds of the offline provider's section bodies, so its documents stay far
// below memory.MaxTotalTokens.
const (
	offlineMaxFiles    = 30
	offlineMaxCommands = 20
	offlineMaxErrors   = 15
	offlineMaxWorklog  = 40
	offlineMaxResults  = 12
	offlineLine        = 160
)

// OfflineProvider answers deterministically without a network. From the
// conversation (every message but the last, which is the extraction prompt)
// and the current notes it derives, per section of the default template:
// the title from the first user request (kept once set), the task from the
// first request, the current state from the latest request and reply, files
// from tool inputs (file_path, path, notebook_path), the workflow from Bash
// commands, errors from failed tool results (with the agent's next words,
// which usually name the fix) and user corrections, key results from the
// agent's answers that state a decision, a fix or a number, and one worklog
// line per user turn. List sections are merged with what the notes
// already hold (entries keyed by path, command or request) and bounded.
//
// It answers with one Edit call per changed section, each replacing the whole
// section text (header and description included, unchanged) so that the
// edits go through the same Edit tool and guards as a model's. When the last
// message carries tool results (its own edits came back), it stops with a
// short text. Sections whose header it does not know are left alone.
type OfflineProvider struct{}

// NewOffline returns the offline provider.
func NewOffline() *OfflineProvider { return &OfflineProvider{} }

// Name implements Provider.
func (*OfflineProvider) Name() string { return KindOffline }

// Model implements Provider.
func (*OfflineProvider) Model() string { return OfflineModel }

// Complete implements Provider.
func (p *OfflineProvider) Complete(ctx context.Context, req Request) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("calling offline: %w", err)
	}
	resp := &Response{Model: OfflineModel, StopReason: "end_turn"}
	for i := range req.Messages {
		resp.Usage.InputTokens += memory.EstimateMessage(&req.Messages[i])
	}
	resp.Usage.InputTokens += memory.EstimateText(req.System)
	switch req.Task {
	case TaskIndex:
		return offlineIndex(resp, req), nil
	case TaskLTM:
		return offlineLTM(resp, req), nil
	case TaskQuery:
		resp.Text, _ = memory.ExtractiveAnswer(req.Question, req.Passages, 3)
		resp.Usage.OutputTokens = memory.EstimateText(resp.Text)
		return resp, nil
	}
	n := len(req.Messages)
	if n == 0 {
		resp.Text = "Nothing to summarize."
		return resp, nil
	}
	if hasToolResults(req.Messages[n-1].Content) {
		resp.Text = "Notes updated."
		return resp, nil
	}
	facts := derive(req.Messages[:n-1])
	for _, e := range offlineEdits(req.Notes, facts) {
		input, _ := json.Marshal(memory.EditInput{FilePath: req.NotesPath, OldString: e.OldString, NewString: e.NewString})
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{
			ID:    fmt.Sprintf("offline_%d", len(resp.ToolCalls)),
			Name:  memory.EditToolName,
			Input: input,
		})
		resp.Usage.OutputTokens += memory.EstimateText(string(input))
	}
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = "tool_use"
	} else {
		resp.Text = "The notes are up to date."
		resp.UpToDate = true
	}
	return resp, nil
}

func hasToolResults(c events.Content) bool {
	for i := range c {
		if c[i].Type == events.BlockToolResult {
			return true
		}
	}
	return false
}

// facts is what the offline provider reads from a conversation.
type facts struct {
	firstRequest  string
	latestRequest string
	latestReply   string
	files         []string // "- `path` — Tool, Tool"
	commands      []string // "- `cmd`"
	errors        []string
	results       []string
	worklog       []string
}

// statement matches agent text worth keeping as a key result: a decision,
// a fix, or a claim with a number in it.
var statement = regexp.MustCompile(`(?i)^(decision|decided|fixed|found|result)\b|\b(decided|we will use|going with)\b|\d`)

var sentenceEnd = regexp.MustCompile(`[.?!:](\s|$)`)

var correction = regexp.MustCompile(`(?i)^(no[,.!:]|no\s|nope\b)|\b(actually|instead|don't|do not|wrong|that's not|that is not)\b`)

func derive(msgs []events.Message) facts {
	d := &deriver{fileIdx: map[string]*fileUse{}, tools: map[string]toolRef{}, turnCounts: map[string]int{}, pendingFix: -1}
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
			}
		}
	}
	d.endTurn()
	for _, fu := range d.files {
		d.f.files = append(d.f.files, "- `"+fu.path+"` — "+strings.Join(fu.tools, ", "))
	}
	return d.f
}

// fileUse is a file the conversation touched and the tools that did.
type fileUse struct {
	path  string
	tools []string
}

// toolRef names a tool use: its tool and its main argument.
type toolRef struct{ name, arg string }

// deriver accumulates facts over a conversation, block by block.
type deriver struct {
	f       facts
	files   []*fileUse
	fileIdx map[string]*fileUse
	tools   map[string]toolRef

	turnReq    string
	turnTools  []string
	turnCounts map[string]int
	inTurn     bool
	pendingFix int // index in f.errors of an error whose fix is not named yet
}

// endTurn writes the worklog line of the turn in progress.
func (d *deriver) endTurn() {
	if !d.inTurn {
		return
	}
	action := "replied"
	if len(d.turnTools) > 0 {
		var parts []string
		for _, t := range d.turnTools {
			if c := d.turnCounts[t]; c > 1 {
				parts = append(parts, fmt.Sprintf("%s×%d", t, c))
			} else {
				parts = append(parts, t)
			}
		}
		action = strings.Join(parts, ", ")
	}
	d.f.worklog = append(d.f.worklog, "- "+clip(d.turnReq, offlineLine)+" → "+action)
	d.turnTools, d.turnCounts, d.inTurn = nil, map[string]int{}, false
}

// userText starts a turn with a user request (corrections noted).
func (d *deriver) userText(raw string) {
	text := strings.TrimSpace(raw)
	if isWrapper(text) {
		return
	}
	d.endTurn()
	if d.f.firstRequest == "" {
		d.f.firstRequest = text
	}
	d.f.latestRequest, d.f.latestReply = text, ""
	d.turnReq, d.inTurn = text, true
	if correction.MatchString(text) {
		d.f.errors = append(d.f.errors, "- User correction: "+clip(text, offlineLine))
	}
}

// assistantText notes the agent's words: the latest reply, the fix of the
// last error, a key result.
func (d *deriver) assistantText(raw string) {
	t := strings.TrimSpace(raw)
	if t == "" {
		return
	}
	d.f.latestReply = t
	if d.pendingFix >= 0 {
		d.f.errors[d.pendingFix] += " → " + clip(t, offlineLine)
		d.pendingFix = -1
	}
	if statement.MatchString(t) {
		d.f.results = append(d.f.results, "- "+clip(t, 240))
	}
}

// toolUse notes the files and commands of a tool call.
func (d *deriver) toolUse(b *events.Block) {
	var in map[string]any
	_ = json.Unmarshal(b.Input, &in)
	arg := ""
	for _, k := range []string{"file_path", "path", "notebook_path"} {
		if s, ok := in[k].(string); ok && s != "" {
			arg = s
			d.touch(s, b.Name)
			break
		}
	}
	if cmd, ok := in["command"].(string); ok && cmd != "" && b.Name == "Bash" {
		arg = cmd
		line := "- `" + clip(cmd, offlineLine) + "`"
		if !contains(d.f.commands, line) {
			d.f.commands = append(d.f.commands, line)
		}
	}
	d.tools[b.ID] = toolRef{b.Name, arg}
	if d.turnCounts[b.Name] == 0 {
		d.turnTools = append(d.turnTools, b.Name)
	}
	d.turnCounts[b.Name]++
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

// toolError records a failed tool result; the agent's next words name the
// fix.
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
	line += " failed: " + clip(resultText(b), offlineLine)
	d.f.errors = append(d.f.errors, line)
	d.pendingFix = len(d.f.errors) - 1
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

// offlineEdits compares the notes with the derived facts and returns one
// whole-section replacement per changed section.
func offlineEdits(notes string, f facts) []memory.Edit {
	_, sections := memory.Parse(notes)
	var edits []memory.Edit
	for i, s := range sections {
		old := strings.TrimSpace(s.Body)
		var body string
		switch strings.ToLower(strings.TrimSpace(s.Header)) {
		case "session title":
			body = old
			if body == "" && f.firstRequest != "" {
				body = title(f.firstRequest)
			}
		case "current state":
			var lines []string
			if f.latestRequest != "" {
				lines = append(lines, "Latest request: "+clip(f.latestRequest, 400))
			}
			if f.latestReply != "" {
				lines = append(lines, "Latest reply: "+clip(f.latestReply, 400))
			}
			body = strings.Join(lines, "\n")
			if body == "" {
				body = old
			}
		case "task specification":
			body = old
			if body == "" && f.firstRequest != "" {
				body = clip(f.firstRequest, 600)
			}
		case "files and functions":
			body = mergeLines(old, f.files, fileKey, offlineMaxFiles)
		case "workflow":
			body = mergeLines(old, f.commands, lineKey, offlineMaxCommands)
		case "errors & corrections":
			body = mergeLines(old, f.errors, errorKey, offlineMaxErrors)
		case "key results":
			body = mergeLines(old, f.results, lineKey, offlineMaxResults)
		case "worklog":
			body = mergeLines(old, f.worklog, worklogKey, offlineMaxWorklog)
		default:
			continue
		}
		if body == old {
			continue
		}
		ns := s
		ns.Body = body + "\n"
		if i < len(sections)-1 {
			ns.Body += "\n"
		}
		if ns.Text() == s.Text() {
			continue
		}
		edits = append(edits, memory.Edit{OldString: s.Text(), NewString: ns.Text()})
	}
	return edits
}

// title makes a short title from the first request: its first sentence or
// line, at most 10 words.
func title(req string) string {
	line := strings.TrimSpace(strings.SplitN(req, "\n", 2)[0])
	if loc := sentenceEnd.FindStringIndex(line); loc != nil && loc[0] > 0 {
		line = line[:loc[0]]
	}
	words := strings.Fields(line)
	if len(words) > 10 {
		words = words[:10]
	}
	return clip(strings.Join(words, " "), 100)
}

func lineKey(l string) string { return l }

// errorKey keys an error line by what failed, so the line with its fix
// replaces the one without.
func errorKey(l string) string {
	if i := strings.Index(l, " → "); i > 0 {
		return l[:i]
	}
	return l
}

func fileKey(l string) string {
	if i := strings.Index(l, "` — "); i > 0 {
		return l[:i]
	}
	return l
}

func worklogKey(l string) string {
	if i := strings.LastIndex(l, " → "); i > 0 {
		return l[:i]
	}
	return l
}

// mergeLines merges existing body lines with new entries: an existing line
// whose key a new entry shares is replaced by it (in the new entry's place);
// the other existing lines come first, in their order, then every entry.
// Only the last max lines are kept.
func mergeLines(body string, entries []string, key func(string) string, max int) string {
	newKeys := map[string]bool{}
	for _, e := range entries {
		newKeys[key(e)] = true
	}
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.TrimSpace(l) == "" || newKeys[key(l)] {
			continue
		}
		out = append(out, l)
	}
	out = append(out, entries...)
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.Join(out, "\n")
}

// offlineIndex answers an indexing call with metadata derived from the
// serialized conversation (the last user message of the request).
func offlineIndex(resp *Response, req Request) *Response {
	input := ""
	if n := len(req.Messages); n > 0 {
		input = memory.RequestText(&req.Messages[n-1])
	}
	input = strings.TrimSuffix(strings.TrimPrefix(input, "<conversation>\n"), "\n</conversation>")
	b, _ := json.Marshal(memory.OfflineIndex(input))
	resp.Text = string(b)
	resp.Usage.OutputTokens = memory.EstimateText(resp.Text)
	return resp
}

// offlineLTM answers a long-term memory call with one memory_write per
// deterministic extraction (memory.OfflineMemoryOps); once its writes came
// back, it stops.
func offlineLTM(resp *Response, req Request) *Response {
	if n := len(req.Messages); n > 0 && hasToolResults(req.Messages[n-1].Content) {
		resp.Text = "Memory updated."
		return resp
	}
	for _, op := range memory.OfflineMemoryOps(req.Batch, req.MemoryTypes) {
		input, _ := json.Marshal(map[string]string{"type": op.Type, "content": op.Content, "peer_id": op.PeerID})
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: fmt.Sprintf("offline_%d", len(resp.ToolCalls)), Name: MemoryWriteTool, Input: input})
		resp.Usage.OutputTokens += memory.EstimateText(string(input))
	}
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = "tool_use"
	} else {
		resp.Text = "Nothing worth remembering."
	}
	return resp
}
