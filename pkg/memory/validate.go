package memory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// ErrInvalidContext marks a context the model APIs would reject. Errors of
// ValidateContext wrap it (*ContextError).
var ErrInvalidContext = errors.New("invalid context")

// Rules of a valid context, as ContextError.Rule names them.
const (
	RuleRole          = "role"            // a message's role is user or assistant
	RuleEmptyMessage  = "empty_message"   // a message has at least one block
	RuleEmptyBlock    = "empty_block"     // text (also inside tool results), thinking and redacted data are not blank
	RuleBlockPlace    = "block_place"     // tool_use and thinking in assistant turns, tool_result, image and document in user turns
	RuleToolUse       = "tool_use"        // a tool_use has an id, a name and an object input; ids are unique
	RuleUnanswered    = "unanswered"      // every tool_use is answered in the immediately following user turn
	RuleOrphanResult  = "orphan_result"   // every tool_result answers a tool_use of the immediately preceding assistant turn, once
	RuleResultsFirst  = "results_first"   // in a user turn, tool_result blocks come before any other block
	RuleFirstTurnUser = "first_turn_user" // the context starts with a user turn
)

// ContextError is one broken rule: the index of the message that breaks it
// (in the validated list), the rule, and what is wrong.
type ContextError struct {
	Index  int
	Rule   string
	Detail string
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("invalid context: message %d breaks %s: %s", e.Index, e.Rule, e.Detail)
}

// Is reports whether target is ErrInvalidContext.
func (e *ContextError) Is(target error) bool { return target == ErrInvalidContext }

// turnOf groups messages as the model APIs see them: consecutive messages of
// one role are one turn (the Messages API combines them; an OpenAI-style
// platform sends them back to back, which the same rules keep valid).
type turnOf struct {
	role       string
	first, end int // messages [first, end)
}

func turnsOf(msgs []*events.Message) []turnOf {
	var ts []turnOf
	for i, m := range msgs {
		if n := len(ts); n > 0 && ts[n-1].role == m.Role {
			ts[n-1].end = i + 1
			continue
		}
		ts = append(ts, turnOf{role: m.Role, first: i, end: i + 1})
	}
	return ts
}

// ValidateContext checks msgs — a context as Recall serves it, in order
// (the summary message first, then the kept and synthetic records) —
// against the structural rules the Anthropic Messages API and OpenAI-style
// chat APIs share, and returns the first broken rule as a *ContextError
// (nil when valid):
//
//   - roles are user or assistant, the first turn is a user turn, and no
//     message is empty;
//   - no text block is blank (inside tool results too), a thinking block
//     has its text and signature, a redacted_thinking block its data;
//   - tool_use and thinking blocks appear in assistant turns, tool_result,
//     image and document blocks in user turns;
//   - a tool_use has an id, a name and a JSON object input, and no id is
//     used twice;
//   - every tool_use is answered by a tool_result in the immediately
//     following user turn — except in the final turn, whose calls the
//     platform is still running and answers itself;
//   - every tool_result answers a tool_use of the immediately preceding
//     assistant turn, once, and comes before any other block of its turn.
//
// Consecutive messages of one role form one turn. Rules that depend on the
// platform's request (whether thinking is enabled, tool definitions) are not
// checked. ValidateContext does not modify msgs.
func ValidateContext(msgs []*events.Message) error {
	for i, m := range msgs {
		if err := validateMessage(i, m); err != nil {
			return err
		}
	}
	ts := turnsOf(msgs)
	if len(ts) > 0 && ts[0].role != events.RoleUser {
		return &ContextError{Index: 0, Rule: RuleFirstTurnUser, Detail: "the context starts with an " + ts[0].role + " message"}
	}
	seen := map[string]bool{}
	for k, t := range ts {
		if t.role == events.RoleAssistant {
			if err := checkAnswered(msgs, ts, k, seen); err != nil {
				return err
			}
			continue
		}
		if err := checkResults(msgs, ts, k); err != nil {
			return err
		}
	}
	return nil
}

// validateMessage checks the rules of one message on its own.
func validateMessage(i int, m *events.Message) error {
	bad := func(rule, format string, args ...any) error {
		return &ContextError{Index: i, Rule: rule, Detail: fmt.Sprintf(format, args...)}
	}
	if m.Role != events.RoleUser && m.Role != events.RoleAssistant {
		return bad(RuleRole, "role %q", m.Role)
	}
	if len(m.Content) == 0 {
		return bad(RuleEmptyMessage, "no content blocks")
	}
	for j := range m.Content {
		b := &m.Content[j]
		if blank, what := blankBlock(b); blank {
			return bad(RuleEmptyBlock, "block %d: %s", j, what)
		}
		if !placedRight(m.Role, b.Type) {
			return bad(RuleBlockPlace, "block %d: a %s block in a %s message", j, b.Type, m.Role)
		}
		if b.Type == events.BlockToolUse && (b.ID == "" || b.Name == "" || !jsonObject(b.Input)) {
			return bad(RuleToolUse, "block %d: a tool_use needs an id, a name and an object input (id %q, name %q)", j, b.ID, b.Name)
		}
		if b.Type == events.BlockToolResult && b.ToolUseID == "" {
			return bad(RuleOrphanResult, "block %d: a tool_result without tool_use_id", j)
		}
	}
	return nil
}

// blankBlock reports whether b is a block the APIs reject as empty.
func blankBlock(b *events.Block) (bool, string) {
	switch b.Type {
	case events.BlockText:
		return strings.TrimSpace(b.Text) == "", "blank text"
	case events.BlockThinking:
		return strings.TrimSpace(b.Thinking) == "" || b.Signature == "", "thinking without text or signature"
	case events.BlockRedactedThinking:
		return b.Data == "", "redacted_thinking without data"
	case events.BlockToolResult:
		for k := range b.Content {
			if c := &b.Content[k]; c.Type == events.BlockText && strings.TrimSpace(c.Text) == "" {
				return true, "blank text inside a tool_result"
			}
		}
	}
	return false, ""
}

// placedRight reports whether a block of type typ may appear in a message
// of role.
func placedRight(role, typ string) bool {
	switch typ {
	case events.BlockToolUse, events.BlockThinking, events.BlockRedactedThinking:
		return role == events.RoleAssistant
	case events.BlockToolResult, events.BlockImage, events.BlockDocument:
		return role == events.RoleUser
	}
	return true
}

func jsonObject(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) >= 2 && raw[0] == '{' && raw[len(raw)-1] == '}'
}

// turnToolUses returns the tool_use ids of messages [first, end), in order.
func turnToolUses(msgs []*events.Message, t turnOf) []string {
	var ids []string
	for i := t.first; i < t.end; i++ {
		for _, b := range msgs[i].Content {
			if b.Type == events.BlockToolUse {
				ids = append(ids, b.ID)
			}
		}
	}
	return ids
}

// checkAnswered checks that the tool uses of assistant turn k are new and
// answered by the next turn.
func checkAnswered(msgs []*events.Message, ts []turnOf, k int, seen map[string]bool) error {
	uses := turnToolUses(msgs, ts[k])
	for _, id := range uses {
		if seen[id] {
			return &ContextError{Index: ts[k].first, Rule: RuleToolUse, Detail: fmt.Sprintf("tool_use id %q is used twice", id)}
		}
		seen[id] = true
	}
	if k == len(ts)-1 || len(uses) == 0 {
		return nil
	}
	answered := map[string]bool{}
	next := ts[k+1]
	for i := next.first; i < next.end; i++ {
		for _, b := range msgs[i].Content {
			if b.Type == events.BlockToolResult {
				answered[b.ToolUseID] = true
			}
		}
	}
	for _, id := range uses {
		if !answered[id] {
			return &ContextError{Index: ts[k].first, Rule: RuleUnanswered, Detail: fmt.Sprintf("tool_use %q has no tool_result in the next user turn", id)}
		}
	}
	return nil
}

// checkResults checks that the tool results of user turn k answer the
// previous assistant turn, once each, and come first.
func checkResults(msgs []*events.Message, ts []turnOf, k int) error {
	open := map[string]bool{}
	if k > 0 {
		for _, id := range turnToolUses(msgs, ts[k-1]) {
			open[id] = true
		}
	}
	other := false
	for i := ts[k].first; i < ts[k].end; i++ {
		for _, b := range msgs[i].Content {
			if b.Type != events.BlockToolResult {
				other = true
				continue
			}
			if !open[b.ToolUseID] {
				return &ContextError{Index: i, Rule: RuleOrphanResult, Detail: fmt.Sprintf("tool_result for %q answers no tool_use of the previous assistant turn (or answers it twice)", b.ToolUseID)}
			}
			if other {
				return &ContextError{Index: i, Rule: RuleResultsFirst, Detail: fmt.Sprintf("tool_result for %q follows another block of its turn", b.ToolUseID)}
			}
			delete(open, b.ToolUseID)
		}
	}
	return nil
}
