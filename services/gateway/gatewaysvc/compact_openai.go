package gatewaysvc

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/gateway/wire"
)

// responsesRequest is a Responses request being compacted: its items, the
// same as transcript messages (index for index), its session and size.
type responsesRequest struct {
	req     *wire.ResponsesRequest
	msgs    []wire.Msg
	session string
	tokens  int64
}

// responsesCompaction runs the compaction modes on an OpenAI Responses
// request (compact: POST /v1/responses/compact): Recall's compaction items
// of earlier answers are resolved; /responses/compact and a
// context_management compaction over its compact_threshold (not streamed)
// are answered from memory with a compaction item; Codex's own
// summarization turn is answered from memory (not streamed); transparent
// compaction rewrites what is forwarded. Like anthropicCompaction, it
// forwards unchanged whatever Recall cannot serve.
func (x *exchange) responsesCompaction(compact bool) bool {
	req, err := wire.DecodeResponses(x.body)
	if err != nil || len(req.Items) == 0 {
		return false
	}
	rr := &responsesRequest{req: req, session: ResponsesSession(x.r.Header, req, &x.g.capture.chains).ID, tokens: int64(len(x.body) / 4)}
	changed := x.resolveItems(rr)
	if changed {
		// The items a Recall item replaced no longer count towards a
		// threshold (as in anthropicCompaction).
		if b, err := req.EncodeItems(req.Items); err == nil {
			x.body, rr.tokens = b, int64(len(b)/4)
		}
	}
	rr.msgs = wire.ItemMessages(req.Items)
	cfg := x.g.gatewayConfig(x.tenant)
	switch {
	case compact:
		if x.compactItems(rr) {
			return true
		}
	case !req.Stream && x.codexCompaction(rr, cfg):
		return true
	case !req.Stream && x.itemsOverThreshold(rr):
		changed = true
	case cfg.CompactAboveTokens > 0 && rr.tokens > cfg.CompactAboveTokens:
		if items, _, ok := x.splicedItems(rr, cfg.CompactAboveTokens); ok {
			req.Items, changed = items, true
			x.g.stats.Transparent.Add(1)
		}
	}
	if changed {
		if b, err := req.EncodeItems(req.Items); err == nil {
			x.body = b
		}
	}
	return false
}

// resolveItems replaces the last compaction item, when it is Recall's,
// and everything before it by a user message with its summary, then the
// kept items when the client still sends them (trusted marker, matching
// fingerprint). Another compaction item (the upstream's own) is left.
func (x *exchange) resolveItems(rr *responsesRequest) bool {
	items := rr.req.Items
	at, opaque := wire.LastCompactionItem(items)
	if at < 0 || !wire.IsMarker(opaque) {
		return false
	}
	text, ok := wire.PeekSummary(opaque)
	var kept []wire.Item
	if m, err := wire.Open(x.g.compact.key, opaque, x.tenant, rr.session); err == nil && ok {
		msgs := wire.ItemMessages(items[:at])
		if k := m.Kept; k > 0 && k <= at && fingerprint(&msgs[at-k].Message) == m.Head && m.SummaryLen <= len(text) {
			text, kept = text[:m.SummaryLen], items[at-k:at]
		}
	}
	out := []wire.Item{}
	if ok {
		out = append(out, wire.UserTextItem(SummaryPreamble+text))
	}
	out = append(append(out, kept...), items[at+1:]...)
	rr.req.Items = out
	return true
}

// splicedItems is the request's items compacted from memory: a user
// message with the summary, then the items from the kept start on (moved
// back so a function output keeps its call), validated; and the kept
// start.
func (x *exchange) splicedItems(rr *responsesRequest, threshold int64) ([]wire.Item, *events.CompactReply, bool) {
	rep, from, ok := x.memoryFor(rr.msgs, rr.session, threshold, rr.tokens)
	if !ok {
		return nil, nil, false
	}
	items := append([]wire.Item{wire.UserTextItem(SummaryPreamble + summaryText(rep))}, rr.req.Items[from:]...)
	if err := memory.ValidateContext(wire.Conversation(wire.ItemMessages(items))); err != nil {
		x.g.stats.FailOpen.Add(1)
		x.g.log.Info("forwarding without compaction: the compacted input is not valid", "tenant", x.tenant, "err", err)
		return nil, nil, false
	}
	return items, rep, true
}

// recallItem is the compaction item of a reply mapped onto the request.
func (x *exchange) recallItem(rr *responsesRequest, rep *events.CompactReply, from int) wire.CompactionItem {
	text, n := blockText(summaryText(rep), rr.msgs[from:])
	m := wire.Marker{Tenant: x.tenant, Session: rr.session, LastSummarizedID: rep.LastSummarizedID, SummaryLen: n, Summary: text}
	if from < len(rr.msgs) {
		m.Kept, m.Head = len(rr.msgs)-from, fingerprint(&rr.msgs[from].Message)
	}
	return wire.CompactionItem{Type: wire.TypeCompaction, ID: newID("cmp_recall_"), EncryptedContent: wire.Seal(x.g.compact.key, m)}
}

// compactItems answers POST /v1/responses/compact from memory: a
// response.compaction whose output is one compaction item.
func (x *exchange) compactItems(rr *responsesRequest) bool {
	rep, from, ok := x.memoryFor(rr.msgs, rr.session, rr.tokens, rr.tokens)
	if !ok {
		return false
	}
	x.g.stats.Compacted.Add(1)
	item := x.recallItem(rr, rep, from)
	writeJSONAnswer(x.w, map[string]any{"id": newID("resp_recall_"), "object": "response.compaction", "created_at": time.Now().Unix(),
		"output": []any{item}, "usage": responsesUsage(rr.tokens, 1)})
	return true
}

// itemsOverThreshold serves a context_management compaction whose
// compact_threshold the request passes: the upstream gets summary + kept
// items and the compaction item is put first in the response's output.
func (x *exchange) itemsOverThreshold(rr *responsesRequest) bool {
	var cm []struct {
		Type      string `json:"type"`
		Threshold int64  `json:"compact_threshold"`
	}
	if len(rr.req.ContextManagement) == 0 || json.Unmarshal(rr.req.ContextManagement, &cm) != nil {
		return false
	}
	for _, c := range cm {
		if c.Type != wire.TypeCompaction || c.Threshold <= 0 || rr.tokens <= c.Threshold {
			continue
		}
		items, rep, ok := x.splicedItems(rr, c.Threshold)
		if !ok {
			return false
		}
		from, _ := keptStart(rr.session, rr.msgs, rep)
		item := x.recallItem(rr, rep, keepFrom(rr.msgs, from))
		rr.req.Items = items
		x.onResponse = prependJSON("output", item)
		x.g.stats.Compacted.Add(1)
		return true
	}
	return false
}

// codexCompaction answers Codex's own summarization turn (a rule of
// gateway.client_compaction matching the last user item) from memory, as a
// Responses answer whose message holds the summary.
func (x *exchange) codexCompaction(rr *responsesRequest, cfg events.GatewayConfig) bool {
	if _, ok := IsClientCompaction(cfg, wire.LastUserText(rr.msgs)); !ok {
		return false
	}
	rep, from, ok := x.memoryFor(rr.msgs, rr.session, rr.tokens, rr.tokens)
	if !ok {
		return false
	}
	text, _ := blockText(summaryText(rep), rr.msgs[from:])
	x.g.stats.Compacted.Add(1)
	writeJSONAnswer(x.w, map[string]any{"id": newID("resp_recall_"), "object": "response", "created_at": time.Now().Unix(),
		"status": "completed", "model": rr.req.Model, "output": []any{map[string]any{"type": "message", "id": newID("msg_recall_"),
			"role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}},
		"usage": responsesUsage(rr.tokens, memory.EstimateText(text))})
	return true
}

func responsesUsage(in, out int64) map[string]int64 {
	return map[string]int64{"input_tokens": in, "output_tokens": out, "total_tokens": in + out}
}

// writeJSONAnswer answers from the gateway itself with a JSON body.
func writeJSONAnswer(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderRecallGateway, "compacted")
	_, _ = w.Write(b)
}
