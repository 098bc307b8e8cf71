package gatewaysvc

import (
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

// ClientCompaction is where capture asks whether an Anthropic request is
// the client's own compaction, so that it never stores the summarization
// request as the user's latest message nor the summary as the assistant's
// answer, and continues the session without duplicates afterwards.
// Gateway.clientCompaction holds it; the compaction code (gateway
// tenant config gateway.client_compaction) sets its own rules there, and
// defaultClientCompaction serves until then. Implementations are pure and
// safe for concurrent use.
type ClientCompaction interface {
	// Turn reports whether msgs end in the client's summarization turn —
	// the last user message (system turns may follow it) asks for a
	// summary of the conversation — and at which block of that message
	// the request for a summary starts (Claude Code appends it as a text
	// block after the last tool_result: those blocks are the
	// conversation's and are kept).
	Turn(tenant string, msgs []wire.Msg) (at int, ok bool)
	// Continuation reports whether msgs are a compacted history: the
	// first user message holds the client's summary of what came before.
	Continuation(tenant string, msgs []wire.Msg) bool
}

// Claude Code's texts (2.1.332, testdata/claudecode: 014-compaction's last
// user message, 016-main's first).
const (
	claudeCodeSummaryRequest = "Your task is to create a detailed summary of the conversation so far"
	claudeCodeContinued      = "This session is being continued from a previous conversation"
)

// defaultClientCompaction recognizes Claude Code's compaction by its
// texts.
type defaultClientCompaction struct{}

func (defaultClientCompaction) Turn(_ string, msgs []wire.Msg) (int, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case wire.RoleSystem:
			continue
		case events.RoleUser:
			for j, b := range msgs[i].Content {
				if b.Type == events.BlockText && strings.Contains(b.Text, claudeCodeSummaryRequest) {
					return j, true
				}
			}
		}
		return 0, false
	}
	return 0, false
}

func (defaultClientCompaction) Continuation(_ string, msgs []wire.Msg) bool {
	i := firstUser(msgs)
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(wire.Text(msgs[i].Content)), claudeCodeContinued)
}
