package extraction

import "github.com/recallhq/recall/pkg/events"

// BuildConversation turns stored transcript records (already limited to
// up_to_seq) into the conversation shown to the fork: main-thread messages
// only, roles alternating starting with a user message, streamed records
// sharing a message_id merged into one assistant message, every tool_use
// answered by a tool_result (a synthetic error result is added for a trailing
// unanswered tool_use; orphan results are dropped). lastSummarizedIndex is the
// index in records of the newest record the notes already cover (-1 if
// none). When the conversation exceeds maxTokens (estimated; <= 0 means no
// cap), the oldest messages are dropped — never those after
// lastSummarizedIndex, never half of a tool pair.
func BuildConversation(records []events.Message, lastSummarizedIndex int, maxTokens int64) []events.Message {
	return nil
}
