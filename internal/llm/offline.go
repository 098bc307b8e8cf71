package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// OfflineModel is the model name the offline provider reports.
const OfflineModel = "offline-v1"

// OfflineProvider answers deterministically without a network: it is a
// set of extraction rules, not a model. From the conversation (every
// message but the last, which is the extraction prompt) and the current
// notes it derives, per section of the default template, by the structure
// of agent work rather than its wording: the title and the task from the
// first request (kept once set), the current state from the latest request
// (whole) and reply; files from tool inputs (file_path, path,
// notebook_path) with what each write or edit put there (a write's
// declarations, an edit's new lines); the workflow from Bash commands with
// their exit status and the last lines of their output; errors from failed
// tool results, each followed by what resolved it (the agent's first words,
// then the edit or the command that passed); changes, values an edit
// replaced by others (a path, a port, a flag, a name), after which every
// mention of the old value in the notes says what replaced it; key results
// from the agent's answers that state a decision, a fix or a number; and
// one worklog line per user request, kept whole up to a budget or
// condensed to the sentences that name something specific, with its tool
// calls counted per tool.
//
// The notes accumulate across extractions. A conversation window overlaps
// what the previous extraction saw, so the Worklog ends with a marker line
// (an HTML comment) naming the newest tool call counted; only what follows
// it adds files, commands, errors, results and counts. List sections are
// merged with what the notes already hold (entries keyed by path, command or
// request; a turn's counts add to its line, and calls whose request is
// before the window add to the newest line) and bounded: past their limits
// the oldest lines are folded into one line that keeps counting them (the
// Workflow keeps its first commands and folds between them and the latest),
// so every section stays within memory.MaxSectionTokens and nothing seen is
// lost from the totals. The result depends only on the notes and the
// conversation's structure (roles, tool_use names and inputs, is_error).
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
	facts := derive(req.Messages[:n-1], notesMarker(req.Notes))
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
