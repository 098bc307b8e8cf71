package gatewaysvc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/gateway/wire"
)

// SummaryPreamble opens the plain user turn a Recall summary becomes when it
// is sent upstream (a compaction block the upstream did not sign never
// reaches it as one).
const SummaryPreamble = "This conversation continues from a summary Recall made of its earlier part; the messages after this one follow verbatim.\n\n"

// errNoCompaction is a compaction Recall could not serve (no memory yet,
// the compactor unreachable or slow, a kept window not in the request).
var errNoCompaction = errors.New("Recall could not compact this request")

// compactState is the gateway's compaction side: the tenants' configuration
// (nil until attached: every tenant at the defaults) and the key of the
// markers of its compaction blocks.
type compactState struct {
	tenants atomic.Pointer[tenantcfg.Store]
	key     []byte
}

// markerKey derives the key of the compaction markers from the tenants'
// token list: stable across restarts and replicas, and unknown to a tenant
// (who knows its token, not the others' hashes). In open mode (one tenant)
// it is a constant.
func markerKey(tenants string) []byte {
	k := sha256.Sum256([]byte("recall-gateway-compaction-marker/v1\x00" + tenants))
	return k[:]
}

// AttachConfig makes the gateway read the tenants' configuration (the
// gateway section: compact_above_tokens, client_compaction) from the
// RECALL_CONFIG bucket, watched until ctx ends. Until then every tenant has
// the defaults.
func (g *Gateway) AttachConfig(ctx context.Context, js jetstream.JetStream) error {
	s, err := tenantcfg.Watch(ctx, js, g.log)
	if err != nil {
		return fmt.Errorf("watching the tenants' configuration: %w", err)
	}
	g.compact.tenants.Store(s)
	return nil
}

// gatewayConfig is the tenant's gateway section (the zero value when none).
func (g *Gateway) gatewayConfig(tenant string) events.GatewayConfig {
	s := g.compact.tenants.Load()
	if s == nil {
		return events.GatewayConfig{}
	}
	if c := s.Get(tenant).Gateway; c != nil {
		return *c
	}
	return events.GatewayConfig{}
}

// api is the Recall client of the exchange's tenant, nil when the gateway
// is not connected to Recall.
func (x *exchange) api() client.API {
	r := x.g.recall.Load()
	if r == nil {
		return nil
	}
	c, err := client.New(r.js, x.tenant)
	if err != nil {
		return nil
	}
	return c
}

// fromMemory asks the compactor for a compaction of the session served
// from memory (a preview: no model call, no wait for a running
// extraction), bounded by RECALL_GATEWAY_RECALL_TIMEOUT. threshold is the
// size the compacted context must stay under, tokens the request's.
func (x *exchange) fromMemory(session string, threshold, tokens int64) (*events.CompactReply, error) {
	api := x.api()
	if api == nil || session == "" {
		return nil, fmt.Errorf("%w: not connected to Recall or no session", errNoCompaction)
	}
	ctx, cancel := context.WithTimeout(x.r.Context(), x.g.cfg.RecallTimeout)
	defer cancel()
	req := events.CompactRequest{Preview: true, Trigger: events.TriggerManual, AutoCompactThreshold: threshold, ContextTokens: tokens}
	rep, err := api.Compact(ctx, session, req)
	if err == nil && !rep.Served && catchable(rep.Outcome) && x.catchUp(ctx, api, session) == nil {
		rep, err = api.Compact(ctx, session, req)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCompaction, err)
	}
	if !rep.Served || rep.Summary == nil {
		return nil, fmt.Errorf("%w: %s (%s)", errNoCompaction, rep.Outcome, rep.Reason)
	}
	return rep, nil
}

// catchable reports whether an outcome may turn into a served compaction
// once the session's notes cover the request (catchUp).
func catchable(outcome string) bool {
	switch outcome {
	case memory.OutcomeNoSessionMemory, memory.OutcomeEmptyTemplate, memory.OutcomeNotesBehind,
		memory.OutcomeSummarizedIDNotFound, memory.OutcomeThresholdExceeded, memory.OutcomeNoReduction:
		return true
	}
	return false
}

// catchUp makes the session's notes cover the request when they are
// missing or behind: it stores the request's messages now (capture,
// synchronously) and asks Recall for an extraction, waiting within ctx
// (the request's Recall bound). With Recall's offline extractor that is no
// model call; with a model-backed one it is Recall's extraction model,
// never the client's, and a slow one ends with ctx (fail open).
func (x *exchange) catchUp(ctx context.Context, api client.API, session string) error {
	rc := x.g.recall.Load()
	kind := x.captureAPI()
	if x.path == "/v1/responses/compact" {
		kind = wire.ReplyResponses
	}
	if rc == nil || kind == "" {
		return errNoCompaction
	}
	job := &captureJob{tenant: x.tenant, api: kind, body: x.body, header: http.Header{}}
	for _, h := range capturedHeaders {
		if v := x.r.Header.Get(h); v != "" {
			job.header.Set(h, v)
		}
	}
	if _, err := x.g.capture.capture(ctx, rc, job); err != nil {
		return err
	}
	left := time.Until(deadlineOf(ctx))
	res, err := api.Extract(ctx, session, events.ExtractRequest{TimeoutMS: max(left.Milliseconds()-50, 1)})
	if err != nil {
		return err
	}
	if !res.Success {
		return fmt.Errorf("%w: extraction: %s", errNoCompaction, res.Error)
	}
	return nil
}

func deadlineOf(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(time.Second)
}

// summaryText is the text of a served reply's summary message.
func summaryText(rep *events.CompactReply) string { return wire.Text(rep.Summary.Content) }

// keptStart maps the compactor's kept window back to the request: the
// index of the request message whose record (wire.RecordIDs, capture's
// ids) is the first kept one, else the one after the record the summary
// ends with (lastSummarizedId), else — records stored under other ids —
// the message holding the first kept record by its tool ids or text. The
// request's messages from there on are what the summary does not cover. A
// reply that keeps nothing keeps the request's last turn. ok is false when
// no kept record is in the request.
func keptStart(session string, msgs []wire.Msg, rep *events.CompactReply) (int, bool) {
	ids := wire.RecordIDs(session, msgs)
	if b := rep.Boundary; b != nil && b.PreservedSegment != nil {
		if i := slices.Index(ids, b.PreservedSegment.HeadUUID); i >= 0 {
			return i, true
		}
	}
	if rep.LastSummarizedID != "" {
		if i := slices.Index(ids, rep.LastSummarizedID); i >= 0 {
			return i + 1, true
		}
	}
	if len(rep.Kept) == 0 {
		return len(msgs) - 1, len(msgs) > 0
	}
	for _, e := range rep.Kept {
		var m events.Message
		if e.DataAs(&m) != nil || !m.IsMain() {
			continue
		}
		if i := locate(msgs, &m); i >= 0 {
			return i, true
		}
	}
	return 0, false
}

// locate returns the index of the last message of msgs that holds record
// m: sharing a tool id with it, or, for a record without tools, of its role
// with the same text. -1 when none does.
func locate(msgs []wire.Msg, m *events.Message) int {
	ids := map[string]bool{}
	for _, b := range m.Content {
		if id := b.ID + b.ToolUseID; id != "" {
			ids[id] = true
		}
	}
	text := strings.TrimSpace(wire.Text(m.Content))
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != m.Role {
			continue
		}
		for _, b := range msgs[i].Content {
			if id := b.ID + b.ToolUseID; id != "" && ids[id] {
				return i
			}
		}
		if len(ids) == 0 && text != "" && strings.Contains(wire.Text(msgs[i].Content), text) {
			return i
		}
	}
	return -1
}

// fingerprint is wire.Fingerprint of a message.
func fingerprint(m *events.Message) string {
	parts := make([]string, 0, len(m.Content))
	for _, b := range m.Content {
		parts = append(parts, b.Type+"\x01"+b.Text+b.ID+b.ToolUseID+string(b.Input)+wire.Text(b.Content))
	}
	return wire.Fingerprint(m.Role, parts)
}

// spliced is summary as a plain user turn, then msgs[from:] — from moved
// back so that a tool_result is never cut from its tool_use — repaired
// once (memory.RepairContext) and validated (memory.ValidateContext): the
// context the gateway sends upstream. An error means it is not sent (the
// caller forwards the request unchanged).
func spliced(msgs []wire.Msg, summary string, from int) ([]wire.Msg, error) {
	from = keepFrom(msgs, max(from, 0))
	out := make([]wire.Msg, 0, len(msgs)-from+1)
	out = append(out, summaryMsg(summary))
	out = append(out, msgs[from:]...)
	return served(out)
}

// summaryMsg is the user turn that carries a summary upstream.
func summaryMsg(summary string) wire.Msg {
	return wire.Msg{Message: events.Message{Role: events.RoleUser,
		Content: events.Content{{Type: events.BlockText, Text: SummaryPreamble + strings.TrimSpace(summary)}}}}
}

// keepFrom moves from back while the message there is a user turn whose
// tool results answer an assistant turn before it (or a system turn), so
// the kept messages start at a user text or an assistant turn.
func keepFrom(msgs []wire.Msg, from int) int {
	for from > 0 && from < len(msgs) {
		m := &msgs[from]
		if m.Role == wire.RoleSystem || (m.Role == events.RoleUser && hasResult(m.Content)) {
			from--
			continue
		}
		break
	}
	return min(from, len(msgs))
}

func hasResult(c events.Content) bool {
	for i := range c {
		if c[i].Type == events.BlockToolResult {
			return true
		}
	}
	return false
}

// served repairs the conversation of out (its user and assistant turns;
// system turns stay before the message they preceded) and validates it.
// Messages the repair did not change are sent as the client sent them.
func served(out []wire.Msg) ([]wire.Msg, error) {
	conv := make([]*events.Message, 0, len(out))
	at := make([]int, 0, len(out)) // index in out of conv[i]
	for i := range out {
		if out[i].Role != wire.RoleSystem {
			conv = append(conv, &out[i].Message)
			at = append(at, i)
		}
	}
	fixed, repairs := memory.RepairContext(conv)
	if len(repairs) > 0 {
		out = rebuild(out, at, fixed)
	}
	if err := memory.ValidateContext(wire.Conversation(out)); err != nil {
		return nil, fmt.Errorf("the compacted context is not valid: %w", err)
	}
	return alternate(out), nil
}

// alternate joins each run of conversation messages of one role into one
// message, so that user and assistant turns alternate: the Messages API
// would combine them itself, but OpenAI-style servers and strict proxies
// refuse two user turns in a row — which a compaction makes whenever the
// summary meets a kept user turn, or a compaction-only assistant message
// is dropped between two user turns. System turns in a run go after the
// joined message (never between a tool_use and its results). A joined
// message keeps the first one's other fields (cache_control and the like)
// and every block of each, in order; ValidateContext already read the run
// as one turn, so the result is as valid.
func alternate(out []wire.Msg) []wire.Msg {
	res := make([]wire.Msg, 0, len(out))
	var held []wire.Msg // system turns since the last conversation message
	last := -1          // index in res of the last conversation message
	for _, m := range out {
		if m.Role == wire.RoleSystem {
			held = append(held, m)
			continue
		}
		if last >= 0 && res[last].Role == m.Role {
			if j, ok := joined(res[last], m); ok {
				res[last] = j
				continue
			}
		}
		res = append(append(res, held...), m)
		held, last = nil, len(res)-1
	}
	return append(res, held...)
}

// joined is a then b as one message; false when a raw form cannot be read.
func joined(a, b wire.Msg) (wire.Msg, bool) {
	fields := map[string]json.RawMessage{}
	if a.Raw != nil && json.Unmarshal(a.Raw, &fields) != nil {
		return a, false
	}
	ab, okA := rawBlocks(a)
	bb, okB := rawBlocks(b)
	if !okA || !okB {
		return a, false
	}
	fields["role"], _ = json.Marshal(a.Role)
	fields["content"], _ = json.Marshal(append(ab, bb...))
	raw, err := json.Marshal(fields)
	var m wire.Msg
	if err != nil || json.Unmarshal(raw, &m) != nil {
		return a, false
	}
	return m, true
}

// rawBlocks is m's content as raw blocks, as the client sent them (a string
// content becomes one text block).
func rawBlocks(m wire.Msg) ([]json.RawMessage, bool) {
	if m.Raw == nil {
		out := make([]json.RawMessage, len(m.Content))
		for i := range m.Content {
			b, err := json.Marshal(m.Content[i])
			if err != nil {
				return nil, false
			}
			out[i] = b
		}
		return out, true
	}
	var c struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(m.Raw, &c) != nil {
		return nil, false
	}
	var blocks []json.RawMessage
	if json.Unmarshal(c.Content, &blocks) == nil {
		return blocks, true
	}
	var text string
	if json.Unmarshal(c.Content, &text) != nil {
		return nil, false
	}
	b, _ := json.Marshal(events.Block{Type: events.BlockText, Text: text})
	return []json.RawMessage{b}, true
}

// rebuild is out after a repair: each served message from the original
// (as sent when unchanged), system turns before the message they preceded.
func rebuild(out []wire.Msg, at []int, fixed []memory.ServedMessage) []wire.Msg {
	res := make([]wire.Msg, 0, len(fixed)+4)
	prev := 0 // the next index of out whose system turns are not placed
	for _, s := range fixed {
		if s.From >= 0 {
			for ; prev <= at[s.From]; prev++ {
				if out[prev].Role == wire.RoleSystem {
					res = append(res, out[prev])
				}
			}
		}
		switch {
		case s.From >= 0 && !s.Changed:
			res = append(res, out[at[s.From]])
		default:
			res = append(res, wire.Msg{Message: *s.Message})
		}
	}
	for ; prev < len(out); prev++ {
		if out[prev].Role == wire.RoleSystem {
			res = append(res, out[prev])
		}
	}
	return res
}

// compaction runs the compaction modes of the exchange's API; true when it
// answered the client itself.
func (x *exchange) compaction() bool {
	if !x.mayCompact(x.g.gatewayConfig(x.tenant)) {
		return false
	}
	switch x.p.name + x.path {
	case "anthropic/v1/messages":
		return x.anthropicCompaction()
	case "openai/v1/responses":
		return x.responsesCompaction(false)
	case "openai/v1/responses/compact":
		return x.responsesCompaction(true)
	}
	return false
}

// configuredClientCompaction is capture's ClientCompaction by the tenants'
// gateway.client_compaction rules (IsClientCompaction); continuations are
// recognized as defaultClientCompaction does.
type configuredClientCompaction struct{ g *Gateway }

// Turn implements ClientCompaction: the index of the first text block of
// the last user message that holds a phrase of the matching rule.
func (c configuredClientCompaction) Turn(tenant string, msgs []wire.Msg) (int, bool) {
	rule, ok := IsClientCompaction(c.g.gatewayConfig(tenant), wire.LastUserText(msgs))
	if !ok {
		return 0, false
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != events.RoleUser {
			continue
		}
		for j, b := range msgs[i].Content {
			if b.Type == events.BlockText && rule.Match(b.Text) {
				return j, true
			}
		}
		for j, b := range msgs[i].Content {
			if b.Type == events.BlockText {
				return j, true // the phrases are spread over several blocks
			}
		}
		break
	}
	return 0, false
}

// Continuation implements ClientCompaction.
func (configuredClientCompaction) Continuation(tenant string, msgs []wire.Msg) bool {
	return defaultClientCompaction{}.Continuation(tenant, msgs)
}

// mayCompact is a byte-level pre-check, so the requests the compaction
// code has nothing to do with are not decoded: false only when the body
// holds no compaction block, field, item or edit (a Recall marker is only
// in a block or item), no phrase of a client compaction rule, no context
// edit the gateway would apply, and is under compact_above_tokens.
func (x *exchange) mayCompact(cfg events.GatewayConfig) bool {
	b := x.body
	switch {
	// A Recall marker is only read inside a compaction block or item
	// (type "compaction"), so the body is not searched for one apart: each
	// search is a pass over a body of up to 20 MB.
	case x.path == "/v1/responses/compact", bytes.Contains(b, []byte(`"compaction"`)), bytes.Contains(b, []byte(editCompact)):
		return true
	case cfg.CompactAboveTokens > 0 && int64(len(b)/4) > cfg.CompactAboveTokens:
		return true
	case x.p.name == providerAnthropic && !upstreamEdits(x.g.cfg.AnthropicURL) && mayEdit(b):
		return true
	}
	lower := bytes.ToLower(b)
	for _, r := range cfg.ClientCompaction.EffectiveRules() {
		if rulePresent(lower, r) {
			return true
		}
	}
	return false
}

// mayEdit reports whether a body may hold a context edit that clears
// something: clear_tool_uses, or clear_thinking not keeping "all".
func mayEdit(b []byte) bool {
	if bytes.Contains(b, []byte(events.EditClearToolUses)) {
		return true
	}
	return bytes.Contains(b, []byte(events.EditClearThinking)) && !bytes.Contains(b, []byte(`"keep":"all"`)) && !bytes.Contains(b, []byte(`"keep": "all"`))
}

// rulePresent reports whether the lowercased body holds the longest run of
// letters, digits and spaces of each phrase of r (JSON may escape the
// rest, such as < and >).
func rulePresent(lower []byte, r events.ClientCompactionRule) bool {
	if len(r.Contains) == 0 {
		return false
	}
	for _, p := range r.Contains {
		if !bytes.Contains(lower, []byte(longestPlainRun(strings.ToLower(p)))) {
			return false
		}
	}
	return true
}

func longestPlainRun(s string) string {
	best, start := "", -1
	for i := 0; i <= len(s); i++ {
		plain := i < len(s) && (s[i] == ' ' || s[i] >= 'a' && s[i] <= 'z' || s[i] >= '0' && s[i] <= '9')
		if plain && start < 0 {
			start = i
		}
		if !plain && start >= 0 {
			if i-start > len(best) {
				best = s[start:i]
			}
			start = -1
		}
	}
	return best
}
