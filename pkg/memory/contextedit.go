package memory

import (
	"fmt"
	"slices"

	"github.com/recallhq/recall/pkg/events"
)

// ContextEditInput is what PlanContextEdits decides from.
type ContextEditInput struct {
	// Entries are the records of the platform's current context, in order
	// (only main-thread messages are looked at).
	Entries []WindowEntry
	// Tokens is the context's size for the input_tokens trigger.
	Tokens int64
	// Edits are the strategies, applied in order.
	Edits []events.ContextEdit
}

// ContextEditPlan is the result of PlanContextEdits.
type ContextEditPlan struct {
	// Clear lists the blocks to clear, in transcript order (record, then
	// block index); Applied the strategies that cleared something.
	Clear   []events.ClearedBlock
	Applied []events.AppliedEdit
	// Freed is the estimate the clearing frees (sum of Clear[i].Tokens).
	Freed int64
}

// DefaultContextEdits is the edit a request without strategies gets:
// clear_tool_uses with the API's defaults.
func DefaultContextEdits() []events.ContextEdit {
	return []events.ContextEdit{{Type: events.EditClearToolUses}}
}

// PlanContextEdits decides which blocks of a context to clear, by the
// strategies of Anthropic's context editing, provider-neutral:
//
//   - clear_thinking_20251015 removes the thinking blocks of every assistant
//     turn (records sharing a message_id) but the most recent keep turns
//     that have thinking (default 1; "all" keeps everything).
//   - clear_tool_uses_20250919, once the context holds trigger input tokens
//     (default 100,000) or tool uses, replaces the result of every tool use
//     but the most recent keep (default 3) by a placeholder naming the
//     record (a result shorter than the placeholder is left as it is), and
//     with clear_tool_inputs the tool_use's input by {};
//     exclude_tools are never cleared; when the clearing would free fewer
//     than clear_at_least input tokens, nothing is cleared.
//
// A tool_result keeps its tool_use_id, so every pair stays a pair; text
// blocks (the user's requests and corrections) are never touched. The
// result is a pure function of the input: the same transcript and
// strategies always give the same plan.
func PlanContextEdits(in ContextEditInput) ContextEditPlan {
	var p ContextEditPlan
	tokens := in.Tokens
	for _, e := range in.Edits {
		var cleared []events.ClearedBlock
		var applied events.AppliedEdit
		switch e.Type {
		case events.EditClearThinking:
			cleared, applied = clearThinking(in.Entries, e)
		case events.EditClearToolUses:
			cleared, applied = clearToolUses(in.Entries, e, tokens)
		}
		if len(cleared) == 0 {
			continue
		}
		p.Clear = append(p.Clear, cleared...)
		p.Applied = append(p.Applied, applied)
		p.Freed += applied.ClearedInputTokens
		tokens -= applied.ClearedInputTokens
	}
	slices.SortStableFunc(p.Clear, func(a, b events.ClearedBlock) int {
		if a.Seq != b.Seq {
			return cmpUint(a.Seq, b.Seq)
		}
		return a.Block - b.Block
	})
	return p
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// clearThinking plans clear_thinking.
func clearThinking(es []WindowEntry, e events.ContextEdit) ([]events.ClearedBlock, events.AppliedEdit) {
	keep := int64(events.DefaultKeepThinkingTurns)
	if e.Keep != nil {
		if e.Keep.All {
			return nil, events.AppliedEdit{}
		}
		keep = e.Keep.Value
	}
	// Turns with thinking, newest first.
	type turn struct{ blocks []events.ClearedBlock }
	var turns []turn
	lastID := ""
	for i := len(es) - 1; i >= 0; i-- {
		m := es[i].Message
		if !es[i].main() || m.Role != events.RoleAssistant {
			continue
		}
		var blocks []events.ClearedBlock
		for j := range m.Content {
			if b := &m.Content[j]; b.Type == events.BlockThinking || b.Type == events.BlockRedactedThinking {
				blocks = append(blocks, events.ClearedBlock{UUID: m.UUID, Seq: es[i].Seq, Block: j, Kind: events.ClearThinking,
					Action: events.ActionRemove, Tokens: EstimateBlock(b)})
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if len(turns) > 0 && m.MessageID != "" && m.MessageID == lastID {
			turns[len(turns)-1].blocks = append(turns[len(turns)-1].blocks, blocks...)
			continue
		}
		turns, lastID = append(turns, turn{blocks: blocks}), m.MessageID
	}
	applied := events.AppliedEdit{Type: events.EditClearThinking}
	var out []events.ClearedBlock
	for k := int(min(keep, int64(len(turns)))); k < len(turns); k++ {
		out = append(out, turns[k].blocks...)
		applied.ClearedThinkingTurns++
		for _, b := range turns[k].blocks {
			applied.ClearedInputTokens += b.Tokens
		}
	}
	return out, applied
}

// ctxToolUse is a tool_use block of the context and where its result is.
type ctxToolUse struct {
	entry, block   int // the tool_use
	result, rblock int // its tool_result; result -1 when not in the context
	id, name       string
}

// toolUses lists the context's tool uses in order with their results.
func toolUses(es []WindowEntry) []ctxToolUse {
	var uses []ctxToolUse
	at := map[string]int{}
	for i := range es {
		if !es[i].main() {
			continue
		}
		for j, b := range es[i].Message.Content {
			switch b.Type {
			case events.BlockToolUse:
				at[b.ID] = len(uses)
				uses = append(uses, ctxToolUse{entry: i, block: j, result: -1, id: b.ID, name: b.Name})
			case events.BlockToolResult:
				if k, ok := at[b.ToolUseID]; ok && uses[k].result < 0 {
					uses[k].result, uses[k].rblock = i, j
				}
			}
		}
	}
	return uses
}

// clearToolUses plans clear_tool_uses on a context of tokens input tokens.
func clearToolUses(es []WindowEntry, e events.ContextEdit, tokens int64) ([]events.ClearedBlock, events.AppliedEdit) {
	uses := toolUses(es)
	trigger := events.EditAmount{Type: events.UnitInputTokens, Value: events.DefaultClearTrigger}
	if e.Trigger != nil {
		trigger = *e.Trigger
	}
	if (trigger.Type == events.UnitToolUses && int64(len(uses)) < trigger.Value) ||
		(trigger.Type == events.UnitInputTokens && tokens < trigger.Value) {
		return nil, events.AppliedEdit{}
	}
	keep := int64(events.DefaultKeepToolUses)
	if e.Keep != nil {
		keep = e.Keep.Value
	}
	applied := events.AppliedEdit{Type: events.EditClearToolUses}
	var out []events.ClearedBlock
	for k := 0; k < len(uses)-int(min(keep, int64(len(uses)))); k++ {
		u := uses[k]
		if slices.Contains(e.ExcludeTools, u.name) {
			continue
		}
		n := len(out)
		if u.result >= 0 {
			if b := clearResult(es, u); b.Tokens > 0 {
				out = append(out, b) // a result shorter than the placeholder stays
			}
		}
		if e.ClearToolInputs {
			if b := clearInput(es, u); b.Tokens > 0 {
				out = append(out, b)
			}
		}
		if len(out) > n {
			applied.ClearedToolUses++
		}
	}
	for _, b := range out {
		applied.ClearedInputTokens += b.Tokens
	}
	if len(out) == 0 || (e.ClearAtLeast != nil && applied.ClearedInputTokens < e.ClearAtLeast.Value) {
		return nil, events.AppliedEdit{}
	}
	return out, applied
}

func clearResult(es []WindowEntry, u ctxToolUse) events.ClearedBlock {
	m := es[u.result].Message
	text := fmt.Sprintf(events.ClearedResultText, m.UUID)
	freed := max(EstimateBlock(&m.Content[u.rblock])-EstimateText(text), 0)
	return events.ClearedBlock{UUID: m.UUID, Seq: es[u.result].Seq, Block: u.rblock, Kind: events.ClearToolResult,
		ToolUseID: u.id, ToolName: u.name, Action: events.ActionReplace, Placeholder: text, Tokens: freed}
}

func clearInput(es []WindowEntry, u ctxToolUse) events.ClearedBlock {
	m := es[u.entry].Message
	b := &m.Content[u.block]
	freed := max(charsToTokens(compactJSONLen(b.Input))-charsToTokens(len(events.ClearedInput)), 0)
	return events.ClearedBlock{UUID: m.UUID, Seq: es[u.entry].Seq, Block: u.block, Kind: events.ClearToolInput,
		ToolUseID: u.id, ToolName: u.name, Action: events.ActionReplace, Placeholder: events.ClearedInput, Tokens: freed}
}

// ApplyClearing returns a copy of m with the blocks of cleared that name it
// (by uuid) cleared: tool results replaced by their placeholder text, tool
// inputs by {}, thinking removed. m itself is not changed.
func ApplyClearing(m *events.Message, cleared []events.ClearedBlock) *events.Message {
	remove := map[int]bool{}
	out := *m
	out.Content = slices.Clone(m.Content)
	for _, c := range cleared {
		if c.UUID != m.UUID || c.Block < 0 || c.Block >= len(out.Content) {
			continue
		}
		b := &out.Content[c.Block]
		switch c.Kind {
		case events.ClearToolResult:
			b.Content = events.Content{{Type: events.BlockText, Text: c.Placeholder}}
		case events.ClearToolInput:
			b.Input = []byte(c.Placeholder)
		case events.ClearThinking:
			remove[c.Block] = true
		}
	}
	if len(remove) > 0 {
		kept := out.Content[:0:0]
		for j, b := range out.Content {
			if !remove[j] {
				kept = append(kept, b)
			}
		}
		out.Content = kept
	}
	return &out
}
