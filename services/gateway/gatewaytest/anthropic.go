package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/gateway/wire"
)

// anthropic decides the answer of a Messages request and returns the
// function writing it.
func (u *Upstream) anthropic(w http.ResponseWriter, req *Request) func() {
	r, err := wire.DecodeMessages(req.Body)
	if err != nil {
		return func() { writeRaw(w, 400, wire.ErrorBody("invalid_request_error", err.Error())) }
	}
	req.Stream = r.Stream
	if err := memory.ValidateContext(wire.Conversation(r.Messages)); err != nil {
		req.Invalid = err.Error()
	} else if err := Alternation(r.Messages); err != nil {
		req.Invalid = err.Error()
	}
	resp := wire.Response{ID: fmt.Sprintf("msg_scripted_%d", len(u.Requests())+1), Type: "message", Role: "assistant", Model: r.Model,
		Usage: events.Usage{InputTokens: int64(len(req.Body) / 4)}}
	req.Summarization = u.isSummarization(wire.LastUserText(r.Messages))
	resp.Content, resp.StopReason = u.turn(req)
	resp.Usage.OutputTokens = int64(len(resp.Content[0].Text)/4 + len(resp.Content[0].Input)/4 + 1)
	if !r.Stream {
		return func() { writeJSON(w, 200, resp) }
	}
	return func() { u.streamAnthropic(w, resp) }
}

// turn is the scripted content and stop reason of a request.
func (u *Upstream) turn(req *Request) (events.Content, string) {
	if req.Summarization {
		return events.Content{{Type: events.BlockText, Text: u.script.Summary}}, "end_turn"
	}
	if i := u.nextCall(req.Conversation, u.limit(req.Conversation)); i > 0 {
		input, _ := json.Marshal(map[string]string{"command": u.command(i), "description": fmt.Sprintf("scripted call %d", i)})
		id := fmt.Sprintf("toolu_scripted_%d_%d", len(u.Requests()), i)
		return events.Content{{Type: events.BlockToolUse, ID: id, Name: u.script.ToolName, Input: input}}, "tool_use"
	}
	return events.Content{{Type: events.BlockText, Text: u.script.Final}}, "end_turn"
}

// streamAnthropic writes resp as the Messages API's event stream.
func (u *Upstream) streamAnthropic(w http.ResponseWriter, resp wire.Response) {
	s := newSSE(w, u.script.Delay)
	start := resp
	start.Content, start.StopReason = events.Content{}, ""
	start.Usage.OutputTokens = 1
	s.event("message_start", map[string]any{"type": "message_start", "message": start})
	for i, b := range resp.Content {
		switch b.Type {
		case events.BlockToolUse:
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}})
			for _, c := range chunks(string(b.Input), u.script.ChunkBytes) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "input_json_delta", "partial_json": c}})
			}
		default:
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]string{"type": "text", "text": ""}})
			for _, c := range chunks(b.Text, u.script.ChunkBytes) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "text_delta", "text": c}})
			}
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": resp.StopReason, "stop_sequence": nil},
		"usage": map[string]int64{"output_tokens": resp.Usage.OutputTokens}})
	s.event("message_stop", map[string]string{"type": "message_stop"})
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Alternation checks what strict servers ask beyond memory.ValidateContext
// (which reads consecutive messages of one role as one turn, as the
// Messages API does): user and assistant turns alternate, system turns
// taking no part.
func Alternation(msgs []wire.Msg) error {
	prev := ""
	for i, m := range msgs {
		if m.Role == wire.RoleSystem {
			continue
		}
		if m.Role == prev {
			return fmt.Errorf("messages[%d]: two %s turns in a row", i, m.Role)
		}
		prev = m.Role
	}
	return nil
}
