package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Context-edit strategies, named and shaped like the Anthropic Messages
// API's context_management edits, so a platform that knows one knows both.
const (
	// EditClearToolUses clears the oldest tool results (and optionally the
	// tool inputs) once the context passes a trigger, keeping the most
	// recent tool uses.
	EditClearToolUses = "clear_tool_uses_20250919"
	// EditClearThinking clears the thinking blocks of all but the most
	// recent assistant turns.
	EditClearThinking = "clear_thinking_20251015"
)

// Units of EditAmount.Type.
const (
	UnitInputTokens   = "input_tokens"
	UnitToolUses      = "tool_uses"
	UnitThinkingTurns = "thinking_turns"
)

// Defaults of the strategies, the API's.
const (
	DefaultClearTrigger      = 100000 // input tokens
	DefaultKeepToolUses      = 3
	DefaultKeepThinkingTurns = 1
	// ClearedResultText is the placeholder of a cleared tool result (%s: the
	// record uuid).
	ClearedResultText = "[Tool result cleared by Recall to free context; the full output is in transcript record %s]"
	// ClearedInput is the placeholder input of a cleared tool_use.
	ClearedInput = "{}"
)

// EditAmount is a typed quantity: {"type": "input_tokens", "value": 100000}.
type EditAmount struct {
	Type  string `json:"type"`
	Value int64  `json:"value"`
}

// EditKeep is what a strategy keeps: an EditAmount, or the string "all"
// (clear_thinking only: keep every thinking block).
type EditKeep struct {
	All bool
	EditAmount
}

// MarshalJSON writes "all" or the amount.
func (k EditKeep) MarshalJSON() ([]byte, error) {
	if k.All {
		return []byte(`"all"`), nil
	}
	return json.Marshal(k.EditAmount)
}

// UnmarshalJSON reads "all" or an amount (unknown fields rejected).
func (k *EditKeep) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == `"all"` {
		*k = EditKeep{All: true}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	k.All = false
	return dec.Decode(&k.EditAmount)
}

// ContextEdit is one strategy with its parameters. Unset parameters take
// the defaults: trigger 100,000 input tokens, keep 3 tool uses (clear tool
// uses) or 1 thinking turn (clear thinking).
type ContextEdit struct {
	Type string `json:"type"`
	// Trigger: clear only once the context holds at least this many input
	// tokens or tool uses (clear_tool_uses).
	Trigger *EditAmount `json:"trigger,omitempty"`
	// Keep: the most recent tool uses (clear_tool_uses) or thinking turns
	// (clear_thinking, or "all") left untouched.
	Keep *EditKeep `json:"keep,omitempty"`
	// ClearAtLeast: clear nothing unless at least this many input tokens
	// can be freed (clearing invalidates the prompt cache from the first
	// cleared block on, so a small clearing costs more than it saves).
	ClearAtLeast *EditAmount `json:"clear_at_least,omitempty"`
	// ExcludeTools: tool uses of these tools are never cleared.
	ExcludeTools []string `json:"exclude_tools,omitempty"`
	// ClearToolInputs clears the tool_use inputs of cleared tool uses too.
	ClearToolInputs bool `json:"clear_tool_inputs,omitempty"`
}

// ContextManagement is a list of strategies, applied in order.
type ContextManagement struct {
	Edits []ContextEdit `json:"edits"`
}

// ErrInvalidContextEdit is wrapped by context-management validation errors.
var ErrInvalidContextEdit = errors.New("invalid context_management")

// Validate checks every strategy: known type, units its parameters allow,
// non-negative values; clear_thinking before clear_tool_uses as the API
// requires.
func (c *ContextManagement) Validate() error {
	seenTools := false
	for i, e := range c.Edits {
		at := fmt.Sprintf("edits[%d]", i)
		switch e.Type {
		case EditClearToolUses:
			seenTools = true
			if err := checkAmount(at+".trigger", e.Trigger, UnitInputTokens, UnitToolUses); err != nil {
				return err
			}
			if e.Keep != nil && (e.Keep.All || e.Keep.Type != UnitToolUses || e.Keep.Value < 0) {
				return fmt.Errorf("%w: %s.keep must be {\"type\": %q, \"value\": N >= 0}", ErrInvalidContextEdit, at, UnitToolUses)
			}
			if err := checkAmount(at+".clear_at_least", e.ClearAtLeast, UnitInputTokens); err != nil {
				return err
			}
		case EditClearThinking:
			if seenTools {
				return fmt.Errorf("%w: %s: %s must come before %s", ErrInvalidContextEdit, at, EditClearThinking, EditClearToolUses)
			}
			if e.Keep != nil && !e.Keep.All && (e.Keep.Type != UnitThinkingTurns || e.Keep.Value < 0) {
				return fmt.Errorf("%w: %s.keep must be \"all\" or {\"type\": %q, \"value\": N >= 0}", ErrInvalidContextEdit, at, UnitThinkingTurns)
			}
			if e.Trigger != nil || e.ClearAtLeast != nil || len(e.ExcludeTools) > 0 || e.ClearToolInputs {
				return fmt.Errorf("%w: %s: %s takes only keep", ErrInvalidContextEdit, at, EditClearThinking)
			}
		default:
			return fmt.Errorf("%w: %s.type %q is not a strategy (known: %s, %s)", ErrInvalidContextEdit, at, e.Type, EditClearToolUses, EditClearThinking)
		}
	}
	return nil
}

func checkAmount(at string, a *EditAmount, units ...string) error {
	if a == nil {
		return nil
	}
	if !slices.Contains(units, a.Type) || a.Value < 0 {
		return fmt.Errorf("%w: %s must be {\"type\": %s, \"value\": N >= 0}", ErrInvalidContextEdit, at, `"`+strings.Join(units, `" or "`)+`"`)
	}
	return nil
}

// EditRequest asks which parts of a session's current context to clear
// (VerbEdit). Empty ContextManagement uses the tenant's default, or else
// clear_tool_uses with the API's defaults.
type EditRequest struct {
	ContextManagement *ContextManagement `json:"context_management,omitempty"`
	// ContextTokens is the platform's own count of its context (the
	// input_tokens trigger); 0 estimates it from the transcript.
	ContextTokens int64 `json:"context_tokens,omitempty"`
}

// DecodeEditRequest parses a request body strictly (unknown fields, bad
// strategies and trailing data are errors); an empty body is the zero
// request.
func DecodeEditRequest(b []byte) (EditRequest, error) {
	var r EditRequest
	if len(bytes.TrimSpace(b)) == 0 {
		return r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return EditRequest{}, fmt.Errorf("%w: %v", ErrInvalidContextEdit, err)
	}
	if dec.More() {
		return EditRequest{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidContextEdit)
	}
	if r.ContextTokens < 0 {
		return EditRequest{}, fmt.Errorf("%w: context_tokens must not be negative", ErrInvalidContextEdit)
	}
	if r.ContextManagement != nil {
		if err := r.ContextManagement.Validate(); err != nil {
			return EditRequest{}, err
		}
	}
	return r, nil
}

// Kinds of ClearedBlock.
const (
	ClearToolResult = "tool_result"
	ClearToolInput  = "tool_input"
	ClearThinking   = "thinking"
)

// Actions of ClearedBlock.
const (
	ActionReplace = "replace" // replace the block's content by Placeholder
	ActionRemove  = "remove"  // remove the block
)

// ClearedBlock names one block of the context to clear: the record (uuid
// and stream sequence), the block's index in its content, and what to do.
type ClearedBlock struct {
	UUID  string `json:"uuid"`
	Seq   uint64 `json:"seq"`
	Block int    `json:"block"`
	Kind  string `json:"kind"`
	// ToolUseID and ToolName name the tool use of a tool_result or
	// tool_input.
	ToolUseID string `json:"tool_use_id,omitempty"`
	ToolName  string `json:"tool_name,omitempty"`
	Action    string `json:"action"`
	// Placeholder replaces the tool_result's content (a text block) or the
	// tool_use's input (a JSON object) for ActionReplace.
	Placeholder string `json:"placeholder,omitempty"`
	// Tokens is the estimate the clearing frees (placeholder deducted).
	Tokens int64 `json:"tokens"`
}

// AppliedEdit reports one strategy that cleared something, as the API does.
type AppliedEdit struct {
	Type                 string `json:"type"`
	ClearedToolUses      int    `json:"cleared_tool_uses,omitempty"`
	ClearedThinkingTurns int    `json:"cleared_thinking_turns,omitempty"`
	ClearedInputTokens   int64  `json:"cleared_input_tokens"`
}

// EditReply answers an EditRequest: the blocks to clear, in transcript
// order, and the estimates before and after. The same transcript and
// request always give the same reply.
type EditReply struct {
	AppliedEdits []AppliedEdit  `json:"applied_edits"`
	Clear        []ClearedBlock `json:"clear"`
	TokensBefore int64          `json:"tokens_before"`
	TokensAfter  int64          `json:"tokens_after"`
	// FirstSeq and LastSeq bound the records the context was read from.
	FirstSeq   uint64 `json:"first_seq,omitempty"`
	LastSeq    uint64 `json:"last_seq,omitempty"`
	DurationUS int64  `json:"duration_us"`
}
