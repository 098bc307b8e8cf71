package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// The tools' inputs and outputs. Their JSON schemas are inferred by the
// SDK from these types; the jsonschema tags are the descriptions an agent
// reads.

// CompactInput is compact_session's input.
type CompactInput struct {
	Session       string `json:"session" jsonschema:"the session id to compact"`
	Threshold     int64  `json:"threshold,omitempty" jsonschema:"auto-compact threshold in tokens; 0 uses the compactor's default (167000 for a 200K window)"`
	ContextTokens int64  `json:"context_tokens,omitempty" jsonschema:"your own count of the current context in tokens; 0 lets Recall estimate it from the transcript"`
	ContextWindow int64  `json:"context_window,omitempty" jsonschema:"the model's context window in tokens, used to derive the threshold when none is given"`
	Preview       bool   `json:"preview,omitempty" jsonschema:"only show what a compaction would serve now: no wait for a running extraction, no LLM fallback, nothing recorded"`
}

// CompactOutput is compact_session's output.
type CompactOutput struct {
	Outcome      string `json:"outcome" jsonschema:"how the compaction was made, e.g. session_memory or full_compact, or why it was not"`
	Served       bool   `json:"served" jsonschema:"true when a compacted context was produced"`
	Reason       string `json:"reason,omitempty" jsonschema:"why the compaction was not served or fell back"`
	Summary      string `json:"summary,omitempty" jsonschema:"the summary text that replaces the compacted part of the conversation"`
	KeptCount    int    `json:"kept_count" jsonschema:"transcript messages kept verbatim after the summary"`
	FirstKeptSeq uint64 `json:"first_kept_seq,omitempty" jsonschema:"transcript sequence of the first kept message"`
	LastSeq      uint64 `json:"last_seq,omitempty" jsonschema:"transcript sequence of the last kept message"`
	TokensBefore int64  `json:"tokens_before" jsonschema:"estimated context tokens before the compaction"`
	TokensAfter  int64  `json:"tokens_after" jsonschema:"estimated context tokens after it (summary + kept messages)"`
	Threshold    int64  `json:"threshold" jsonschema:"the auto-compact threshold applied"`
	Truncated    bool   `json:"truncated,omitempty" jsonschema:"note sections were cut to fit the summary"`
}

// EditInput is edit_context's input: the Anthropic context-editing
// strategies in flat form.
type EditInput struct {
	Session            string   `json:"session" jsonschema:"the session id whose current context to edit"`
	KeepToolUses       *int64   `json:"keep_tool_uses,omitempty" jsonschema:"clear old tool results, keeping this many most recent tool uses (default 3)"`
	TriggerTokens      int64    `json:"trigger_tokens,omitempty" jsonschema:"clear only once the context holds at least this many input tokens (default 100000; set 1 to clear now)"`
	ClearAtLeastTokens int64    `json:"clear_at_least_tokens,omitempty" jsonschema:"clear nothing unless at least this many tokens can be freed"`
	ExcludeTools       []string `json:"exclude_tools,omitempty" jsonschema:"names of tools whose results are never cleared"`
	ClearToolInputs    bool     `json:"clear_tool_inputs,omitempty" jsonschema:"also clear the inputs of the cleared tool uses"`
	ClearThinking      bool     `json:"clear_thinking,omitempty" jsonschema:"also clear thinking blocks of older assistant turns"`
	KeepThinkingTurns  *int64   `json:"keep_thinking_turns,omitempty" jsonschema:"with clear_thinking: the most recent assistant turns whose thinking is kept (default 1)"`
	ContextTokens      int64    `json:"context_tokens,omitempty" jsonschema:"your own count of the current context in tokens; 0 lets Recall estimate it"`
}

// EditOutput is edit_context's output.
type EditOutput struct {
	AppliedEdits []events.AppliedEdit  `json:"applied_edits" jsonschema:"the strategies that cleared something"`
	Clear        []events.ClearedBlock `json:"clear" jsonschema:"the blocks to clear, in transcript order: record uuid and seq, block index, kind, action and placeholder"`
	TokensBefore int64                 `json:"tokens_before" jsonschema:"estimated context tokens before clearing"`
	TokensAfter  int64                 `json:"tokens_after" jsonschema:"estimated context tokens after clearing"`
}

// SessionInput names one session.
type SessionInput struct {
	Session string `json:"session" jsonschema:"the session id"`
}

// MemoryOutput is get_session_memory's output.
type MemoryOutput struct {
	Session     string `json:"session"`
	Notes       string `json:"notes" jsonschema:"the session's memory notes (markdown)"`
	Revision    uint64 `json:"revision" jsonschema:"the memory record's revision; it grows with every extraction"`
	CoveredSeq  uint64 `json:"covered_seq" jsonschema:"the highest transcript sequence the notes cover"`
	Extractions int    `json:"extractions" jsonschema:"extractions committed so far"`
	UpdatedAt   string `json:"updated_at,omitempty" jsonschema:"RFC 3339 time of the last extraction"`
}

// ExtractInput is extract_session's input.
type ExtractInput struct {
	Session   string `json:"session" jsonschema:"the session id to extract memory from now"`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"longest wait for the extraction in milliseconds; 0 uses Recall's default"`
}

// ExtractOutput is extract_session's output.
type ExtractOutput struct {
	Success   bool   `json:"success"`
	MemoryKey string `json:"memory_key,omitempty" jsonschema:"the key the notes were written to"`
	UpToSeq   uint64 `json:"up_to_seq,omitempty" jsonschema:"the transcript sequence the notes now cover"`
	Revision  uint64 `json:"revision,omitempty" jsonschema:"the memory record's new revision"`
}

func compactTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[CompactInput, CompactOutput]) {
	t := &mcp.Tool{Name: "compact_session", Description: "Compact a session's context now from its background memory: " +
		"returns the summary that replaces the older conversation, how many recent messages are kept verbatim, and " +
		"the token counts before and after. Use preview to look without compacting."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in CompactInput) (*mcp.CallToolResult, CompactOutput, error) {
		r := events.CompactRequest{Trigger: events.TriggerManual, AutoCompactThreshold: in.Threshold,
			ContextTokens: in.ContextTokens, ContextWindow: in.ContextWindow, Preview: in.Preview}
		rep, err := c.Compact(callContext(ctx, req), in.Session, r)
		if err != nil {
			return nil, CompactOutput{}, err
		}
		out := CompactOutput{Outcome: rep.Outcome, Served: rep.Served, Reason: rep.Reason, KeptCount: rep.KeptCount,
			FirstKeptSeq: rep.FirstKeptSeq, LastSeq: rep.LastSeq, TokensBefore: rep.TokensBefore,
			TokensAfter: rep.TokensAfter, Threshold: rep.Threshold, Truncated: rep.Truncated}
		if rep.Summary != nil {
			var parts []string
			for _, b := range rep.Summary.Content {
				parts = append(parts, b.Text)
			}
			out.Summary = strings.Join(parts, "\n")
		}
		return nil, out, nil
	}
}

func editTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[EditInput, EditOutput]) {
	t := &mcp.Tool{Name: "edit_context", Description: "Context editing: ask Recall which old tool results (and optionally " +
		"tool inputs and thinking blocks) of a session's current context to clear to free tokens, keeping the most " +
		"recent tool uses. Returns the blocks to clear with their placeholders and the token counts before and after. " +
		"With no strategy options the tenant's default strategy (or clearing tool results) applies."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in EditInput) (*mcp.CallToolResult, EditOutput, error) {
		rep, err := c.Edit(callContext(ctx, req), in.Session, editRequest(in))
		if err != nil {
			return nil, EditOutput{}, err
		}
		out := EditOutput{AppliedEdits: rep.AppliedEdits, Clear: rep.Clear, TokensBefore: rep.TokensBefore, TokensAfter: rep.TokensAfter}
		if out.AppliedEdits == nil {
			out.AppliedEdits = []events.AppliedEdit{}
		}
		if out.Clear == nil {
			out.Clear = []events.ClearedBlock{}
		}
		return nil, out, nil
	}
}

// editRequest builds the strategies of in; none when in sets no option, so
// that the tenant's default applies.
func editRequest(in EditInput) events.EditRequest {
	r := events.EditRequest{ContextTokens: in.ContextTokens}
	var edits []events.ContextEdit
	if in.ClearThinking {
		e := events.ContextEdit{Type: events.EditClearThinking}
		if in.KeepThinkingTurns != nil {
			e.Keep = &events.EditKeep{EditAmount: events.EditAmount{Type: events.UnitThinkingTurns, Value: *in.KeepThinkingTurns}}
		}
		edits = append(edits, e)
	}
	if in.KeepToolUses != nil || in.TriggerTokens > 0 || in.ClearAtLeastTokens > 0 || len(in.ExcludeTools) > 0 || in.ClearToolInputs {
		e := events.ContextEdit{Type: events.EditClearToolUses, ExcludeTools: in.ExcludeTools, ClearToolInputs: in.ClearToolInputs}
		if in.KeepToolUses != nil {
			e.Keep = &events.EditKeep{EditAmount: events.EditAmount{Type: events.UnitToolUses, Value: *in.KeepToolUses}}
		}
		if in.TriggerTokens > 0 {
			e.Trigger = &events.EditAmount{Type: events.UnitInputTokens, Value: in.TriggerTokens}
		}
		if in.ClearAtLeastTokens > 0 {
			e.ClearAtLeast = &events.EditAmount{Type: events.UnitInputTokens, Value: in.ClearAtLeastTokens}
		}
		edits = append(edits, e)
	}
	if len(edits) > 0 {
		r.ContextManagement = &events.ContextManagement{Edits: edits}
	}
	return r
}

func memoryTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[SessionInput, MemoryOutput]) {
	t := &mcp.Tool{Name: "get_session_memory", Description: "Read a session's memory notes: the markdown document Recall " +
		"keeps up to date in the background (task, decisions, files, errors and fixes, next steps). " +
		"Fails with 404 when no extraction has run yet."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in SessionInput) (*mcp.CallToolResult, MemoryOutput, error) {
		rep, err := c.Memory(callContext(ctx, req), in.Session)
		if err != nil {
			return nil, MemoryOutput{}, err
		}
		return nil, MemoryOutput{Session: in.Session, Notes: rep.Record.Notes, Revision: rep.Revision,
			CoveredSeq: rep.Record.CoveredSeq, Extractions: rep.Record.Extractions, UpdatedAt: rfc3339(rep.Record.UpdatedAt)}, nil
	}
}

func extractTool(c *client.HTTP) (*mcp.Tool, mcp.ToolHandlerFor[ExtractInput, ExtractOutput]) {
	t := &mcp.Tool{Name: "extract_session", Description: "Run a memory extraction of a session now (instead of waiting " +
		"for Recall's trigger) and wait for it: the session's notes then cover its transcript up to now."}
	return t, func(ctx context.Context, req *mcp.CallToolRequest, in ExtractInput) (*mcp.CallToolResult, ExtractOutput, error) {
		rep, err := c.Extract(callContext(ctx, req), in.Session, events.ExtractRequest{TimeoutMS: in.TimeoutMS})
		if err != nil {
			return nil, ExtractOutput{}, err
		}
		if !rep.Success {
			return nil, ExtractOutput{}, fmt.Errorf("the extraction of %s failed: %s", in.Session, rep.Error)
		}
		return nil, ExtractOutput{Success: true, MemoryKey: rep.MemoryKey, UpToSeq: rep.UpToSeq, Revision: rep.Revision}, nil
	}
}

// callContext carries the MCP client's own bearer token, when its HTTP
// request had one, to the calls of Recall.
func callContext(ctx context.Context, req interface{ GetExtra() *mcp.RequestExtra }) context.Context {
	extra := req.GetExtra()
	if extra == nil || extra.Header == nil {
		return ctx
	}
	if tok, ok := strings.CutPrefix(extra.Header.Get("Authorization"), "Bearer "); ok && tok != "" {
		return client.WithToken(ctx, strings.TrimSpace(tok))
	}
	return ctx
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
