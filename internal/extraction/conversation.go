package extraction

import (
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Synthetic texts BuildConversation inserts.
const (
	// OmittedNote starts the conversation when older messages were dropped
	// by the token cap (or when the transcript starts with an assistant
	// message).
	OmittedNote = "[Earlier messages of this session are omitted here; the current notes cover them.]"
	// MissingResult answers a tool_use whose result was never recorded.
	MissingResult = "[No result was recorded for this tool call.]"
)

// turn is a conversation message under construction, with the indexes of
// the oldest and newest records merged into it (-1: none).
type turn struct {
	msg      events.Message
	firstRec int
	lastRec  int
}

// BuildConversation turns stored transcript records (already limited to
// up_to_seq, in transcript order) into the conversation shown to the fork.
//
//   - Only main-thread messages are used (subagent records are skipped: the
//     main thread carries their results as tool results).
//   - Thinking and redacted_thinking blocks and blank texts are dropped.
//   - Consecutive records of one role are merged into one message, so the
//     roles alternate; streamed assistant records sharing a message_id
//     become one message even when tool results were recorded between
//     them. In user messages tool_result blocks come first.
//   - Every tool_use is answered in the next message: missing results get
//     a synthetic error result (MissingResult), results without a matching
//     tool_use are dropped, and unanswered tool_use blocks of the final
//     assistant message are dropped (the API rejects them).
//   - The conversation starts with a user message (OmittedNote is inserted
//     when it would not).
//
// lastSummarizedIndex is the index in records of the newest record the notes
// already cover (-1 when none). When maxTokens > 0 and the conversation's
// estimate exceeds it, the oldest messages are dropped until it fits, but
// never a message holding a record after lastSummarizedIndex, nor the last
// message; a tool pair is dropped whole, and OmittedNote marks the cut. The result may therefore
// still exceed maxTokens. BuildConversation does not modify records.
func BuildConversation(records []events.Message, lastSummarizedIndex int, maxTokens int64) []events.Message {
	conv, _ := BuildWindow(records, lastSummarizedIndex, maxTokens, false)
	return conv
}

// BuildWindow is BuildConversation for a session read from a window start
// instead of its first record, and reports where the next window can start.
//
// omitted says that records before records[0] exist and were not read: the
// conversation is then marked as one the token cap cut (OmittedNote, and the
// first user message loses the tool results whose tool_use was not read).
// first is the index in records of the oldest record the next window needs
// (0 when nothing was cut or omitted: read what was read again). Reading a longer transcript of the session
// from that record gives the conversation BuildConversation gives on the
// whole transcript, as long as maxTokens does not grow and lastSummarized
// does not move back: the cap only ever drops more of the oldest messages.
func BuildWindow(records []events.Message, lastSummarizedIndex int, maxTokens int64, omitted bool) (conv []events.Message, first int) {
	var turns []turn
	for i := range records {
		r := &records[i]
		if !r.IsMain() || (r.Role != events.RoleUser && r.Role != events.RoleAssistant) {
			continue
		}
		content := cleanContent(r.Content)
		if len(content) == 0 {
			continue
		}
		n := len(turns)
		switch {
		case n > 0 && turns[n-1].msg.Role == r.Role:
			appendTurn(&turns[n-1], content, r, i)
		case r.Role == events.RoleAssistant && r.MessageID != "" && resumesStream(turns, r.MessageID):
			// A streamed response continued after tool results were
			// recorded: fold it into its first part and move the results
			// after it.
			a := lastAssistant(turns)
			appendTurn(&turns[a], content, r, i)
			user := turn{msg: events.Message{Role: events.RoleUser}, firstRec: -1, lastRec: -1}
			for _, t := range turns[a+1:] {
				mergeTurn(&user, t)
			}
			turns = append(turns[:a+1], user)
		default:
			t := turn{msg: events.Message{Role: r.Role, UUID: r.UUID, MessageID: r.MessageID, Model: r.Model}, firstRec: i, lastRec: i}
			t.msg.Content = append(events.Content(nil), content...)
			turns = append(turns, t)
		}
	}
	turns = pairTools(turns)
	start := cutStart(turns, lastSummarizedIndex, maxTokens, omitted)
	if start > 0 || omitted {
		first = windowStart(turns, start)
		turns = markCut(append([]turn(nil), turns[start:]...))
	}
	if len(turns) > 0 && turns[0].msg.Role != events.RoleUser {
		turns = append([]turn{omittedTurn()}, turns...)
	}
	out := make([]events.Message, len(turns))
	for i := range turns {
		out[i] = turns[i].msg
		out[i].Content = orderUserBlocks(out[i].Role, out[i].Content)
	}
	return out, first
}

// windowStart is the index of the record the next window starts at when
// turns[start:] are kept, 0 when there is none: the newest turn at or
// before the oldest kept one that starts a window — a user prompt (text,
// no tool results: no streamed response folds over it and it answers no
// tool_use), or an assistant turn other than the newest (no later record
// folds into it, and the results after it stay paired) — moved back to the
// start of any older turn a record after it was folded into. Reading from
// there builds the same turns from there on, and as the transcript grows
// the cap only ever drops more of the oldest turns.
func windowStart(turns []turn, start int) int {
	newest := lastAssistant(turns)
	at := -1
	for i := min(start, len(turns)-1); i >= 0 && at < 0; i-- {
		t := turns[i]
		switch {
		case t.firstRec < 0:
		case t.msg.Role == events.RoleUser && isPrompt(t.msg.Content), t.msg.Role == events.RoleAssistant && i != newest:
			at = i
		}
	}
	if at < 0 {
		return 0
	}
	first := turns[at].firstRec
	for i := at - 1; i >= 0; i-- {
		if turns[i].lastRec >= first {
			first = min(first, turns[i].firstRec)
		}
	}
	return first
}

// isPrompt reports whether a user message has text and no tool results.
func isPrompt(c events.Content) bool {
	text := false
	for _, b := range c {
		switch b.Type {
		case events.BlockToolResult:
			return false
		case events.BlockText:
			text = true
		}
	}
	return text
}

func appendTurn(t *turn, content events.Content, r *events.Message, idx int) {
	t.msg.Content = append(t.msg.Content, content...)
	if r.UUID != "" {
		t.msg.UUID = r.UUID
	}
	if idx > t.lastRec {
		t.lastRec = idx
	}
	t.firstRec = minRec(t.firstRec, idx)
}

// mergeTurn appends t's content and records to dst.
func mergeTurn(dst *turn, t turn) {
	appendTurn(dst, t.msg.Content, &t.msg, t.lastRec)
	dst.firstRec = minRec(dst.firstRec, t.firstRec)
}

// minRec is the smaller of two record indexes, -1 meaning none.
func minRec(a, b int) int {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	}
	return min(a, b)
}

// omittedTurn is the user message that stands for messages left out.
func omittedTurn() turn {
	return turn{msg: events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: OmittedNote}}}, firstRec: -1, lastRec: -1}
}

func lastAssistant(turns []turn) int {
	for i := len(turns) - 1; i >= 0; i-- {
		if turns[i].msg.Role == events.RoleAssistant {
			return i
		}
	}
	return -1
}

// resumesStream reports whether the newest assistant turn has messageID and
// only tool results follow it.
func resumesStream(turns []turn, messageID string) bool {
	a := lastAssistant(turns)
	if a < 0 || turns[a].msg.MessageID != messageID {
		return false
	}
	for _, t := range turns[a+1:] {
		for _, b := range t.msg.Content {
			if b.Type != events.BlockToolResult {
				return false
			}
		}
	}
	return true
}

func cleanContent(c events.Content) events.Content {
	var out events.Content
	for _, b := range c {
		switch b.Type {
		case events.BlockThinking, events.BlockRedactedThinking:
			continue
		case events.BlockText:
			if strings.TrimSpace(b.Text) == "" {
				continue // the APIs reject blank text blocks
			}
		}
		out = append(out, b)
	}
	return out
}

// orderUserBlocks puts tool_result blocks first in a user message.
func orderUserBlocks(role string, c events.Content) events.Content {
	if role != events.RoleUser {
		return c
	}
	out := make(events.Content, 0, len(c))
	for _, b := range c {
		if b.Type == events.BlockToolResult {
			out = append(out, b)
		}
	}
	for _, b := range c {
		if b.Type != events.BlockToolResult {
			out = append(out, b)
		}
	}
	return out
}

// pairTools makes every tool_use answered by the next message and drops
// orphan results; see BuildConversation.
func pairTools(turns []turn) []turn {
	var out []turn
	var pending []string // tool_use ids of the previous assistant turn
	for i := 0; i < len(turns); i++ {
		t := turns[i]
		if t.msg.Role == events.RoleAssistant {
			if len(pending) > 0 {
				// Cannot happen after merging; answer them defensively.
				out = append(out, turn{msg: events.Message{Role: events.RoleUser, Content: missingResults(pending, nil)}, firstRec: -1, lastRec: -1})
			}
			pending = toolUseIDs(t.msg.Content)
			out = append(out, t)
			continue
		}
		want := map[string]bool{}
		for _, id := range pending {
			want[id] = true
		}
		var kept events.Content
		got := map[string]bool{}
		for _, b := range t.msg.Content {
			if b.Type == events.BlockToolResult {
				if !want[b.ToolUseID] || got[b.ToolUseID] {
					continue
				}
				got[b.ToolUseID] = true
			}
			kept = append(kept, b)
		}
		kept = append(missingResults(pending, got), kept...)
		pending = nil
		if len(kept) == 0 {
			continue
		}
		t.msg.Content = kept
		out = append(out, t)
	}
	if len(pending) > 0 {
		// The final assistant turn waits for results: drop its tool calls.
		last := &out[len(out)-1]
		var kept events.Content
		for _, b := range last.msg.Content {
			if b.Type != events.BlockToolUse {
				kept = append(kept, b)
			}
		}
		last.msg.Content = kept
		if len(kept) == 0 {
			out = out[:len(out)-1]
		}
	}
	// Dropping messages may have put two user turns side by side.
	return mergeAdjacent(out)
}

func mergeAdjacent(turns []turn) []turn {
	var out []turn
	for _, t := range turns {
		if n := len(out); n > 0 && out[n-1].msg.Role == t.msg.Role {
			mergeTurn(&out[n-1], t)
			continue
		}
		out = append(out, t)
	}
	return out
}

func toolUseIDs(c events.Content) []string {
	var ids []string
	for _, b := range c {
		if b.Type == events.BlockToolUse {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

func missingResults(ids []string, got map[string]bool) events.Content {
	var out events.Content
	for _, id := range ids {
		if !got[id] {
			out = append(out, events.Block{Type: events.BlockToolResult, ToolUseID: id, IsError: true,
				Content: events.Content{{Type: events.BlockText, Text: MissingResult}}})
		}
	}
	return out
}

// cutStart is the index of the oldest turn kept: while the conversation
// exceeds maxTokens the oldest turns are dropped, never a turn holding a
// record after lastSummarized, nor the newest turn.
func cutStart(turns []turn, lastSummarized int, maxTokens int64, omitted bool) int {
	if maxTokens <= 0 || len(turns) == 0 {
		return 0
	}
	sizes := make([]int64, len(turns))
	var total int64
	for i := range turns {
		sizes[i] = memory.EstimateMessage(&turns[i].msg)
		total += sizes[i]
	}
	// protect: first turn holding an unsummarized record; the newest turn
	// is always kept.
	protect := len(turns) - 1
	for i := range turns {
		if turns[i].lastRec > lastSummarized {
			protect = i
			break
		}
	}
	start := 0
	for start < protect && total > maxTokens {
		total -= sizes[start]
		start++
	}
	// Start on a user turn: drop one more, or keep one less at the
	// protected boundary. A window that opens on an assistant turn
	// (windowStart) is a cut already.
	if (start > 0 || omitted) && start < len(turns) && turns[start].msg.Role == events.RoleAssistant {
		if start+1 <= protect && start+1 < len(turns) {
			start++
		} else if start > 0 {
			start--
		}
	}
	return start
}

// markCut marks the start of a conversation whose older messages are left
// out: OmittedNote opens it, and the first user turn's tool results lost
// their tool_use.
func markCut(out []turn) []turn {
	if len(out) == 0 || out[0].msg.Role != events.RoleUser {
		return append([]turn{omittedTurn()}, out...)
	}
	first := out[0]
	var kept events.Content
	for _, b := range first.msg.Content {
		if b.Type != events.BlockToolResult {
			kept = append(kept, b)
		}
	}
	first.msg.Content = append(events.Content{{Type: events.BlockText, Text: OmittedNote}}, kept...)
	out[0] = first
	return out
}

// String renders a conversation compactly for debugging and test failures.
func String(conv []events.Message) string {
	s := ""
	for _, m := range conv {
		s += m.Role + ":"
		for _, b := range m.Content {
			switch b.Type {
			case events.BlockText:
				s += fmt.Sprintf(" text(%q)", b.Text)
			case events.BlockToolUse:
				s += " use(" + b.ID + ")"
			case events.BlockToolResult:
				if b.IsError {
					s += " result!(" + b.ToolUseID + ")"
				} else {
					s += " result(" + b.ToolUseID + ")"
				}
			default:
				s += " " + b.Type
			}
		}
		s += "\n"
	}
	return s
}
