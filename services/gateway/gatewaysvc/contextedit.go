package gatewaysvc

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/gateway/wire"
)

// upstreamEdits reports whether the Anthropic upstream applies context
// editing itself: the Anthropic API (a host under anthropic.com) does,
// with its own cache accounting, so the gateway forwards the edits; any
// other Anthropic-compatible upstream gets them applied by the gateway.
func upstreamEdits(anthropicURL string) bool {
	u, err := url.Parse(anthropicURL)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "anthropic.com" || strings.HasSuffix(h, ".anthropic.com")
}

// splitEdits separates the context-editing strategies of a
// context_management object (clear_tool_uses, clear_thinking) from its
// other edits, kept as sent.
func splitEdits(cm json.RawMessage) (clear []events.ContextEdit, other []json.RawMessage) {
	var v struct {
		Edits []json.RawMessage `json:"edits"`
	}
	if len(cm) == 0 || json.Unmarshal(cm, &v) != nil {
		return nil, nil
	}
	for _, raw := range v.Edits {
		var e events.ContextEdit
		if json.Unmarshal(raw, &e) == nil && (e.Type == events.EditClearToolUses || e.Type == events.EditClearThinking) {
			clear = append(clear, e)
			continue
		}
		other = append(other, raw)
	}
	return clear, other
}

// editContext applies the request's clear_tool_uses and clear_thinking
// edits in the gateway — the compactor's strategies (memory.PlanContextEdits,
// memory.ApplyClearing) on the request's messages — when the upstream does
// not apply them itself (upstreamEdits). When something is cleared, the
// applied strategies are taken out of what is forwarded; when nothing is,
// the request is left as it is. The edited context is validated; an
// invalid one is not sent (the request goes unchanged).
func (x *exchange) editContext(req *wire.MessagesRequest, session string) bool {
	if upstreamEdits(x.g.cfg.AnthropicURL) {
		return false
	}
	edits, other := splitEdits(req.ContextManagement)
	if len(edits) == 0 {
		return false
	}
	msgs, ok := clearMessages(req.Messages, wire.RecordIDs(session, req.Messages), edits, int64(len(x.body)/4))
	if !ok {
		return false
	}
	if _, err := served(msgs); err != nil {
		x.g.log.Warn("context editing gave an invalid context; forwarding unchanged", "tenant", x.tenant, "err", err)
		return false
	}
	req.Messages = msgs
	req.ContextManagement = nil
	if len(other) > 0 {
		req.ContextManagement, _ = json.Marshal(map[string]any{"edits": other})
	}
	return true
}

// clearMessages plans the edits over msgs (tokens: the context's size) and
// returns msgs with the cleared blocks replaced; ok false when nothing is
// cleared. A cleared result's placeholder names the message's transcript
// record (ids, wire.RecordIDs), where capture stored the full output.
func clearMessages(msgs []wire.Msg, ids []string, edits []events.ContextEdit, tokens int64) ([]wire.Msg, bool) {
	es := make([]memory.WindowEntry, 0, len(msgs))
	for i := range msgs {
		if msgs[i].Role == wire.RoleSystem {
			continue
		}
		m := msgs[i].Message
		m.UUID = ids[i]
		if m.UUID == "" {
			m.UUID = fmt.Sprintf("request message %d", i)
		}
		es = append(es, memory.WindowEntry{Seq: uint64(i + 1), Message: &m})
	}
	plan := memory.PlanContextEdits(memory.ContextEditInput{Entries: es, Tokens: tokens, Edits: edits})
	if len(plan.Clear) == 0 {
		return nil, false
	}
	bySeq := map[uint64][]events.ClearedBlock{}
	for _, c := range plan.Clear {
		bySeq[c.Seq] = append(bySeq[c.Seq], c)
	}
	out := make([]wire.Msg, len(msgs))
	copy(out, msgs)
	for _, e := range es {
		if cs := bySeq[e.Seq]; len(cs) > 0 {
			m := memory.ApplyClearing(e.Message, cs)
			m.UUID = msgs[e.Seq-1].UUID
			out[e.Seq-1] = wire.Msg{Message: *m}
		}
	}
	return out, true
}
