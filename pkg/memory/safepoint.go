package memory

import (
	"iter"

	"github.com/recallhq/recall/pkg/events"
)

// SafePoint returns the index in msgs of the newest main-thread message the
// notes may be said to cover up to — the value of lastSummarizedId — or -1
// when there is none.
//
// A message i is a safe point when, counting main-thread messages 0..i only,
//   - every tool_use has its tool_result (the point is not inside an
//     assistant turn whose tool calls are still waiting for results), and
//   - the next main-thread message does not continue the same streamed
//     response (same non-empty MessageID), so a response is never split.
//
// A tool_use left unanswered when a later response begins (the platform
// crashed or moved on; the API never accepts a new response while a call
// waits) is orphaned: it no longer holds the point back, so one crash does
// not pin lastSummarizedId for the rest of the session.
//
// Compaction keeps the messages after the safe point verbatim, so a tool_use
// is never separated from its result. msgs is in transcript order;
// subagent messages are ignored (they are neither safe points nor counted).
func SafePoint(msgs []events.Message) int {
	safe := -1
	for i := range SafePoints(msgs) {
		safe = i
	}
	return safe
}

// SafePoints yields the index of every safe point of msgs, oldest first, by
// SafePoint's rule (the last one is SafePoint's answer). Every point but
// the newest is final; the newest main-thread message counts when nothing
// waits after it, as if msgs ended the transcript.
func SafePoints(msgs []events.Message) iter.Seq[int] {
	return func(yield func(int) bool) {
		open := map[string]bool{}
		prev := -1            // index of the previous main-thread message
		closedAtPrev := false // no tool_use was waiting after prev
		for i := range msgs {
			m := &msgs[i]
			if !m.IsMain() {
				continue
			}
			continues := prev >= 0 && m.MessageID != "" && msgs[prev].MessageID == m.MessageID
			if m.Role == events.RoleAssistant && !continues && len(open) > 0 {
				clear(open) // a new response: calls still open are orphaned
				closedAtPrev = true
			}
			if prev >= 0 && !continues && closedAtPrev && !yield(prev) {
				return
			}
			for _, b := range m.Content {
				switch b.Type {
				case events.BlockToolUse:
					if b.ID != "" {
						open[b.ID] = true
					}
				case events.BlockToolResult:
					delete(open, b.ToolUseID)
				}
			}
			closedAtPrev = len(open) == 0
			prev = i
		}
		if prev >= 0 && closedAtPrev {
			yield(prev)
		}
	}
}
