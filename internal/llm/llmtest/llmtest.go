// Package llmtest provides HTTP-level fakes of the Anthropic Messages API and
// the OpenAI Chat Completions API, so the real SDK clients can be exercised
// end to end in tests: point the client's base URL at Server.BaseURL.
//
// A Server answers each call with the next scripted Reply (text, tool calls,
// an HTTP error status or a raw malformed body), or with a Responder
// function, and records every request body for assertions. An optional fixed
// latency delays every answer (the request's cancellation ends the wait).
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// API kinds a Server fakes.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
)

// ToolCall is a scripted tool call of a reply.
type ToolCall struct {
	// ID defaults to a generated id ("toolu_<call>_<n>" / "call_<call>_<n>").
	ID   string
	Name string
	// Input is the tool input as JSON text. It may be malformed: Anthropic
	// replies then carry it as a JSON string (not an object), OpenAI replies
	// carry it verbatim as the arguments string.
	Input string
}

// Usage is scripted token usage (Anthropic's accounting: Input excludes the
// cache tokens; the OpenAI fake reports prompt_tokens = Input+CacheRead+
// CacheCreation and cached_tokens = CacheRead).
type Usage struct {
	Input, Output, CacheRead, CacheCreation int64
}

// Reply is one scripted answer.
type Reply struct {
	// Status, when not 0 or 200, answers with that HTTP status and an API
	// error body (429 → rate limit, 5xx → server error).
	Status int
	// RetryAfter, with an error Status, is sent as the wait the client
	// should make (the retry-after-ms header both APIs send).
	RetryAfter time.Duration
	// Body, when set, is sent verbatim with status 200 (malformed bodies).
	Body       string
	Text       string
	ToolCalls  []ToolCall
	StopReason string // default "tool_use"/"tool_calls" with tool calls, else "end_turn"/"stop"
	Usage      Usage
	Model      string // default: the requested model
}

// Responder computes a reply from the call number (0-based) and the request
// body. It is called concurrently when the client calls concurrently.
type Responder func(call int, body []byte) Reply

// Server is a fake API endpoint. Its methods are safe for concurrent use.
type Server struct {
	kind string
	srv  *httptest.Server

	mu        sync.Mutex
	queue     []Reply
	responder Responder
	latency   time.Duration
	requests  [][]byte
	calls     int
}

// NewAnthropic starts a fake Anthropic Messages API (POST /v1/messages)
// answering with replies in order. It is closed when the test ends.
func NewAnthropic(t testing.TB, replies ...Reply) *Server { return start(t, Anthropic, replies) }

// NewOpenAI starts a fake OpenAI Chat Completions API (POST
// /v1/chat/completions) answering with replies in order. It is closed when
// the test ends.
func NewOpenAI(t testing.TB, replies ...Reply) *Server { return start(t, OpenAI, replies) }

func start(t testing.TB, kind string, replies []Reply) *Server {
	s := &Server{kind: kind, queue: append([]Reply(nil), replies...)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// BaseURL is the base URL to configure the SDK client with.
func (s *Server) BaseURL() string {
	if s.kind == OpenAI {
		return s.srv.URL + "/v1/"
	}
	return s.srv.URL
}

// Close shuts the server down; later calls fail with transport errors.
func (s *Server) Close() { s.srv.Close() }

// Enqueue appends scripted replies.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetResponder answers every call the queue does not cover with r.
func (s *Server) SetResponder(r Responder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = r
}

// SetLatency delays every answer by d.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// Calls is the number of requests received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Requests returns the recorded request bodies in arrival order.
func (s *Server) Requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.requests...)
}

// Request returns the i-th request body decoded as a generic JSON object; it
// fails the test when there is none.
func (s *Server) Request(t testing.TB, i int) map[string]any {
	t.Helper()
	reqs := s.Requests()
	if i < 0 || i >= len(reqs) {
		t.Fatalf("llmtest: request %d of %d", i, len(reqs))
	}
	var m map[string]any
	if err := json.Unmarshal(reqs[i], &m); err != nil {
		t.Fatalf("llmtest: request %d is not JSON: %v", i, err)
	}
	return m
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	want := "/v1/messages"
	if s.kind == OpenAI {
		want = "/v1/chat/completions"
	}
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != want {
		http.Error(w, fmt.Sprintf("llmtest: unexpected %s %s", r.Method, r.URL.Path), http.StatusNotFound)
		return
	}

	s.mu.Lock()
	call := s.calls
	s.calls++
	s.requests = append(s.requests, body)
	latency := s.latency
	var reply Reply
	var ok bool
	if len(s.queue) > 0 {
		reply, s.queue, ok = s.queue[0], s.queue[1:], true
	}
	responder := s.responder
	s.mu.Unlock()

	if !ok && responder != nil {
		reply, ok = responder(call, body), true
	}
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if !ok {
		s.writeError(w, http.StatusBadRequest, "llmtest: no scripted reply left")
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)
	if reply.Model == "" {
		reply.Model = req.Model
	}
	switch {
	case reply.Status != 0 && reply.Status != http.StatusOK:
		if reply.RetryAfter > 0 {
			w.Header().Set("retry-after-ms", strconv.FormatInt(reply.RetryAfter.Milliseconds(), 10))
		}
		s.writeError(w, reply.Status, fmt.Sprintf("llmtest: scripted status %d", reply.Status))
	case reply.Body != "":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply.Body)
	case s.kind == OpenAI:
		writeJSON(w, openAIBody(call, reply))
	default:
		writeJSON(w, anthropicBody(call, reply))
	}
}

func (s *Server) writeError(w http.ResponseWriter, status int, msg string) {
	typ := "api_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == 529:
		typ = "overloaded_error"
	case status < 500:
		typ = "invalid_request_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if s.kind == OpenAI {
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil, "param": nil}})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func anthropicBody(call int, r Reply) map[string]any {
	content := []any{}
	if r.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for i, tc := range r.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("toolu_%d_%d", call, i)
		}
		var input any = json.RawMessage(tc.Input)
		if !json.Valid([]byte(tc.Input)) {
			input = tc.Input
		}
		content = append(content, map[string]any{"type": "tool_use", "id": id, "name": tc.Name, "input": input})
	}
	stop := r.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(r.ToolCalls) > 0 {
			stop = "tool_use"
		}
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_%d", call), "type": "message", "role": "assistant", "model": r.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens": r.Usage.Input, "output_tokens": r.Usage.Output,
			"cache_read_input_tokens": r.Usage.CacheRead, "cache_creation_input_tokens": r.Usage.CacheCreation,
		},
	}
}

func openAIBody(call int, r Reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil}
	if r.Text != "" {
		msg["content"] = r.Text
	}
	if len(r.ToolCalls) > 0 {
		calls := []any{}
		for i, tc := range r.ToolCalls {
			id := tc.ID
			if id == "" {
				id = fmt.Sprintf("call_%d_%d", call, i)
			}
			calls = append(calls, map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Input}})
		}
		msg["tool_calls"] = calls
	}
	stop := r.StopReason
	if stop == "" {
		stop = "stop"
		if len(r.ToolCalls) > 0 {
			stop = "tool_calls"
		}
	}
	prompt := r.Usage.Input + r.Usage.CacheRead + r.Usage.CacheCreation
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", call), "object": "chat.completion", "created": 1700000000, "model": r.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": stop, "logprobs": nil}},
		"usage": map[string]any{
			"prompt_tokens": prompt, "completion_tokens": r.Usage.Output, "total_tokens": prompt + r.Usage.Output,
			"prompt_tokens_details": map[string]any{"cached_tokens": r.Usage.CacheRead},
		},
	}
}
