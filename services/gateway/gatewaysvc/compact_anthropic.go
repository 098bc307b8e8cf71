package gatewaysvc

import (
	"encoding/json"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/gateway/wire"
)

// Anthropic's compaction edit, its default trigger and the stop reason of
// an answer that is a compaction block alone.
const (
	editCompact           = "compact_20260112"
	defaultCompactTrigger = 150000
	stopCompaction        = "compaction"
)

// compactEdit is a compact_20260112 edit of context_management.
type compactEdit struct {
	Type    string `json:"type"`
	Trigger *struct {
		Value int64 `json:"value"`
	} `json:"trigger"`
	Pause bool `json:"pause_after_compaction"`
}

// anthropicCompaction runs the compaction modes on a Messages request, in
// this order (see docs/gateway.md): Recall's compaction blocks of earlier
// answers are resolved (always, Recall reachable or not); a client's own
// summarization turn, the on-demand compaction field and a
// compact_20260112 edit over its trigger are answered from memory;
// transparent compaction (gateway.compact_above_tokens) and context editing
// rewrite what is forwarded. It returns true when it answered the client;
// otherwise x.body is what to forward. Whatever Recall cannot serve is
// forwarded unchanged (fail open, Stats.FailOpen).
func (x *exchange) anthropicCompaction() bool {
	req, err := wire.DecodeMessages(x.body)
	if err != nil {
		return false // the upstream answers the 400
	}
	session := AnthropicSession(x.r.Header, req).ID
	subagent := x.r.Header.Get("X-Claude-Code-Agent-Id") != ""
	changed := x.resolveBlocks(req, session)
	tokens := int64(len(x.body) / 4)
	if changed {
		// What the upstream would get now: the messages a Recall block
		// replaced do not count towards a trigger any more.
		if b, err := req.Encode(); err == nil {
			x.body, tokens = b, int64(len(b)/4)
		}
	}
	cfg := x.g.gatewayConfig(x.tenant)
	switch {
	case subagent:
	case x.clientCompaction(req, session, cfg, tokens):
		return true
	case len(req.Compaction) > 0:
		if x.onDemand(req, session, tokens) {
			return true
		}
	default:
		if done, ch := x.compactEdit(req, session, tokens); done {
			return true
		} else if ch {
			changed = true
		} else if x.transparent(req, session, cfg, tokens) {
			changed = true
		}
	}
	if x.editContext(req, session) {
		changed = true
	}
	if changed {
		if b, err := req.Encode(); err == nil {
			x.body = b
		}
	}
	return false
}

// resolveBlocks replaces the last compaction block of the request, when it
// is Recall's, and everything before it by plain content the upstream
// accepts: the summary as a user turn, then the kept window — the client's
// own messages when it still sends them (a trusted marker whose fingerprint
// matches), else the block's rendering of them — then the rest of the
// block's message and what follows. An upstream's own (signed) block is
// left as it is.
func (x *exchange) resolveBlocks(req *wire.MessagesRequest, session string) bool {
	fb, ok := wire.LastCompaction(req.Messages)
	if !ok || !fb.Recall() {
		return false
	}
	text, before := fb.Summary, []wire.Msg(nil)
	if m, err := wire.Open(x.g.compact.key, fb.Opaque, x.tenant, session); err == nil {
		if k := m.Kept; k > 0 && k <= fb.Msg && fingerprint(&req.Messages[fb.Msg-k].Message) == m.Head && m.SummaryLen <= len(text) {
			text, before = text[:m.SummaryLen], req.Messages[fb.Msg-k:fb.Msg]
		}
	}
	rest := blocksAfter(req.Messages[fb.Msg], fb.Block)
	out := append([]wire.Msg{summaryMsg(text)}, before...)
	if rest != nil {
		out = append(out, *rest)
	}
	out = append(out, req.Messages[fb.Msg+1:]...)
	res, err := served(out)
	if err != nil {
		// Drop what cannot be made valid rather than send a block the
		// upstream did not sign: the summary and what followed the block.
		res = alternate(append([]wire.Msg{summaryMsg(text)}, req.Messages[fb.Msg+1:]...))
	}
	req.Messages = res
	return true
}

// blocksAfter is msg with only its blocks after index block (nil when none).
func blocksAfter(msg wire.Msg, block int) *wire.Msg {
	var raw struct {
		Content []json.RawMessage `json:"content"`
	}
	if json.Unmarshal(msg.Raw, &raw) != nil || block+1 >= len(raw.Content) {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"role": msg.Role, "content": raw.Content[block+1:]})
	var m wire.Msg
	if json.Unmarshal(b, &m) != nil || len(m.Content) == 0 {
		return nil
	}
	return &m
}

// clientCompaction answers a client's own summarization turn (recognized by
// the tenant's gateway.client_compaction rules) from memory, in the format
// the rule names, streamed when the request streams.
func (x *exchange) clientCompaction(req *wire.MessagesRequest, session string, cfg events.GatewayConfig, tokens int64) bool {
	rule, ok := IsClientCompaction(cfg, wire.LastUserText(req.Messages))
	if !ok {
		return false
	}
	rep, from, ok := x.memoryFor(req.Messages, session, tokens, tokens)
	if !ok {
		return false
	}
	text, _ := blockText(summaryText(rep), req.Messages[from:])
	if rule.Answer == events.AnswerSummaryTags {
		text = "<summary>\n" + text + "\n</summary>"
	}
	x.g.stats.Compacted.Add(1)
	x.g.log.Info("client compaction answered from memory", "tenant", x.tenant, "session", session, "client", rule.Name, "outcome", rep.Outcome)
	writeMessage(x.w, req.Model, req.Stream, []any{map[string]string{"type": events.BlockText, "text": text}}, "end_turn", tokens)
	return true
}

// IsClientCompaction reports whether lastUserText (the text of a
// request's last user message, wire.LastUserText) is a client's own
// summarization turn by the tenant's rules (cfg.ClientCompaction, else
// the defaults), and which rule matched. Capture uses it so the turn is
// never stored as the user's latest request.
func IsClientCompaction(cfg events.GatewayConfig, lastUserText string) (events.ClientCompactionRule, bool) {
	if lastUserText == "" {
		return events.ClientCompactionRule{}, false
	}
	for _, r := range cfg.ClientCompaction.EffectiveRules() {
		if r.Match(lastUserText) {
			return r, true
		}
	}
	return events.ClientCompactionRule{}, false
}

// memoryFor is a compaction from memory mapped onto msgs: the reply and
// the index of the first kept message. ok false (counted as fail-open)
// when Recall cannot serve one.
func (x *exchange) memoryFor(msgs []wire.Msg, session string, threshold, tokens int64) (*events.CompactReply, int, bool) {
	rep, err := x.fromMemory(session, threshold, tokens)
	if err == nil {
		if from, ok := keptStart(session, msgs, rep); ok {
			return rep, keepFrom(msgs, min(from, len(msgs)-1)), true
		}
		err = errNoCompaction
	}
	x.g.stats.FailOpen.Add(1)
	x.g.log.Info("forwarding without compaction", "tenant", x.tenant, "session", session, "err", err)
	return nil, 0, false
}

// recallBlock is the compaction block of a reply mapped onto msgs.
func (x *exchange) recallBlock(msgs []wire.Msg, session string, rep *events.CompactReply, from int) wire.CompactionBlock {
	text, n := blockText(summaryText(rep), msgs[from:])
	m := wire.Marker{Tenant: x.tenant, Session: session, LastSummarizedID: rep.LastSummarizedID, SummaryLen: n}
	if from < len(msgs) {
		m.Kept, m.Head = len(msgs)-from, fingerprint(&msgs[from].Message)
	}
	return wire.NewCompactionBlock(text, wire.Seal(x.g.compact.key, m))
}

// onDemand answers the compaction field: one compaction block, stop
// reason "compaction", no model call.
func (x *exchange) onDemand(req *wire.MessagesRequest, session string, tokens int64) bool {
	rep, from, ok := x.memoryFor(req.Messages, session, tokens, tokens)
	if !ok {
		return false
	}
	x.g.stats.Compacted.Add(1)
	writeMessage(x.w, req.Model, req.Stream, []any{x.recallBlock(req.Messages, session, rep, from)}, stopCompaction, tokens)
	return true
}

// compactEdit serves a compact_20260112 edit whose trigger the request
// passes: with pause_after_compaction the block alone is the answer (done);
// without, the upstream gets summary + kept window and the block is put
// before its answer (changed).
func (x *exchange) compactEdit(req *wire.MessagesRequest, session string, tokens int64) (done, changed bool) {
	var cm struct {
		Edits []json.RawMessage `json:"edits"`
	}
	if len(req.ContextManagement) == 0 || json.Unmarshal(req.ContextManagement, &cm) != nil {
		return false, false
	}
	for _, raw := range cm.Edits {
		var e compactEdit
		if json.Unmarshal(raw, &e) != nil || e.Type != editCompact {
			continue
		}
		trigger := int64(defaultCompactTrigger)
		if e.Trigger != nil && e.Trigger.Value > 0 {
			trigger = e.Trigger.Value
		}
		if tokens <= trigger {
			return false, false
		}
		rep, from, ok := x.memoryFor(req.Messages, session, trigger, tokens)
		if !ok {
			return false, false
		}
		block := x.recallBlock(req.Messages, session, rep, from)
		x.g.stats.Compacted.Add(1)
		if e.Pause {
			writeMessage(x.w, req.Model, req.Stream, []any{block}, stopCompaction, tokens)
			return true, false
		}
		msgs, err := spliced(req.Messages, summaryText(rep), from)
		if err != nil {
			return false, false
		}
		req.Messages = msgs
		x.onResponse = prependBlock(block)
		return false, true
	}
	return false, false
}

// transparent forwards a request over the tenant's compact_above_tokens as
// summary + kept window; the client keeps its own history.
func (x *exchange) transparent(req *wire.MessagesRequest, session string, cfg events.GatewayConfig, tokens int64) bool {
	if cfg.CompactAboveTokens <= 0 || tokens <= cfg.CompactAboveTokens {
		return false
	}
	rep, from, ok := x.memoryFor(req.Messages, session, cfg.CompactAboveTokens, tokens)
	if !ok {
		return false
	}
	msgs, err := spliced(req.Messages, summaryText(rep), from)
	if err != nil {
		x.g.stats.FailOpen.Add(1)
		return false
	}
	req.Messages = msgs
	x.g.stats.Transparent.Add(1)
	return true
}

// outputTokens estimates the tokens of an answer's content.
func outputTokens(content []any) int64 {
	b, _ := json.Marshal(content)
	return max(memory.EstimateText(string(b)), 1)
}
