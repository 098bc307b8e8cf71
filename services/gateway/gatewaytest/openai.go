package gatewaytest

import (
	"fmt"
	"net/http"
	"time"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

// chat decides the answer of a Chat Completions request.
func (u *Upstream) chat(w http.ResponseWriter, req *Request) func() {
	r, err := wire.DecodeChat(req.Body)
	if err != nil {
		return func() { writeRaw(w, 400, wire.OpenAIErrorBody("invalid_request_error", "invalid_body", err.Error())) }
	}
	req.Stream = r.Stream
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "user" {
		req.Summarization = u.isSummarization(wire.ContentText(r.Messages[n-1].Content))
	}
	content, stop := u.turn(req)
	id := fmt.Sprintf("chatcmpl-scripted-%d", len(u.Requests())+1)
	usage := map[string]int{"prompt_tokens": len(req.Body) / 4, "completion_tokens": 8, "total_tokens": len(req.Body)/4 + 8}
	msg := map[string]any{"role": "assistant", "content": nil}
	finish := "stop"
	if stop == "tool_use" {
		b := content[0]
		msg["tool_calls"] = []map[string]any{{"id": "call_" + b.ID, "type": "function",
			"function": map[string]string{"name": b.Name, "arguments": string(b.Input)}}}
		finish = "tool_calls"
	} else {
		msg["content"] = content[0].Text
	}
	if !r.Stream {
		return func() {
			writeJSON(w, 200, map[string]any{"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": r.Model,
				"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		}
	}
	return func() { u.streamChat(w, id, r.Model, msg, finish, usage) }
}

// streamChat writes one chat completion as chunks, then [DONE].
func (u *Upstream) streamChat(w http.ResponseWriter, id, model string, msg map[string]any, finish string, usage map[string]int) {
	s := newSSE(w, u.script.Delay)
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
			c["choices"] = []any{}
		}
		s.event("", c)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if text, ok := msg["content"].(string); ok {
		for _, c := range chunks(text, u.script.ChunkBytes) {
			chunk(map[string]any{"content": c}, nil, nil)
		}
	}
	if calls, ok := msg["tool_calls"].([]map[string]any); ok {
		f := calls[0]["function"].(map[string]string)
		chunk(map[string]any{"tool_calls": []map[string]any{{"index": 0, "id": calls[0]["id"], "type": "function",
			"function": map[string]string{"name": f["name"], "arguments": ""}}}}, nil, nil)
		for _, c := range chunks(f["arguments"], u.script.ChunkBytes) {
			chunk(map[string]any{"tool_calls": []map[string]any{{"index": 0, "function": map[string]string{"arguments": c}}}}, nil, nil)
		}
	}
	chunk(map[string]any{}, finish, nil)
	chunk(nil, nil, usage)
	s.event("", []byte("[DONE]"))
}

// responses decides the answer of a Responses (or compact) request.
func (u *Upstream) responses(w http.ResponseWriter, req *Request) func() {
	r, err := wire.DecodeResponses(req.Body)
	if err != nil {
		return func() { writeRaw(w, 400, wire.OpenAIErrorBody("invalid_request_error", "invalid_body", err.Error())) }
	}
	req.Stream = r.Stream
	if n := len(r.Items); n > 0 && r.Items[n-1].Type == "message" && r.Items[n-1].Role == "user" {
		req.Summarization = u.isSummarization(wire.ContentText(r.Items[n-1].Content))
	}
	n := len(u.Requests()) + 1
	usage := map[string]int{"input_tokens": len(req.Body) / 4, "output_tokens": 8, "total_tokens": len(req.Body)/4 + 8}
	if req.API == "openai.compact" {
		item := map[string]string{"type": "compaction", "id": fmt.Sprintf("cmp_scripted_%d", n), "encrypted_content": "scripted:" + u.script.Summary}
		return func() {
			writeJSON(w, 200, map[string]any{"id": fmt.Sprintf("resp_scripted_%d", n), "object": "response.compaction",
				"created_at": time.Now().Unix(), "output": []any{item}, "usage": usage})
		}
	}
	content, stop := u.turn(req)
	item := responseItem(n, content[0], stop)
	resp := map[string]any{"id": fmt.Sprintf("resp_scripted_%d", n), "object": "response", "created_at": time.Now().Unix(),
		"status": "completed", "model": r.Model, "output": []any{item}, "usage": usage}
	if !r.Stream {
		return func() { writeJSON(w, 200, resp) }
	}
	return func() { u.streamResponses(w, resp, item) }
}

// responseItem is the output item of a scripted turn.
func responseItem(n int, b events.Block, stop string) map[string]any {
	if stop == "tool_use" {
		return map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_scripted_%d", n), "call_id": "call_" + b.ID,
			"name": b.Name, "arguments": string(b.Input), "status": "completed"}
	}
	return map[string]any{"type": "message", "id": fmt.Sprintf("msg_scripted_%d", n), "role": "assistant", "status": "completed",
		"content": []map[string]any{{"type": "output_text", "text": b.Text, "annotations": []any{}}}}
}

// streamResponses writes a response as the Responses API's event stream.
func (u *Upstream) streamResponses(w http.ResponseWriter, resp, item map[string]any) {
	s := newSSE(w, u.script.Delay)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		s.event(typ, fields)
	}
	created := map[string]any{}
	for k, v := range resp {
		created[k] = v
	}
	created["status"], created["output"] = "in_progress", []any{}
	ev("response.created", map[string]any{"response": created})
	ev("response.in_progress", map[string]any{"response": created})
	added := map[string]any{}
	for k, v := range item {
		added[k] = v
	}
	added["status"] = "in_progress"
	if item["type"] == "message" {
		added["content"] = []any{}
	} else {
		added["arguments"] = ""
	}
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": added})
	if item["type"] == "message" {
		u.streamText(ev, item)
	} else {
		args, _ := item["arguments"].(string)
		for _, c := range chunks(args, u.script.ChunkBytes) {
			ev("response.function_call_arguments.delta", map[string]any{"output_index": 0, "item_id": item["id"], "delta": c})
		}
		ev("response.function_call_arguments.done", map[string]any{"output_index": 0, "item_id": item["id"], "arguments": args})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": resp})
}

// streamText writes the content part events of a message item.
func (u *Upstream) streamText(ev func(string, map[string]any), item map[string]any) {
	part := item["content"].([]map[string]any)[0]
	text, _ := part["text"].(string)
	at := map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0}
	with := func(k string, v any) map[string]any {
		m := map[string]any{k: v}
		for a, b := range at {
			m[a] = b
		}
		return m
	}
	ev("response.content_part.added", with("part", map[string]any{"type": "output_text", "text": "", "annotations": []any{}}))
	for _, c := range chunks(text, u.script.ChunkBytes) {
		ev("response.output_text.delta", with("delta", c))
	}
	ev("response.output_text.done", with("text", text))
	ev("response.content_part.done", with("part", part))
}
