// Package gatewaytest is a scripted model upstream: an HTTP server speaking
// the Anthropic Messages API (POST /v1/messages, streaming SSE and not;
// /v1/messages/count_tokens) and the OpenAI Chat Completions and Responses
// APIs (POST /v1/chat/completions, /v1/responses, /v1/responses/compact),
// answering from a Script instead of a model. The gateway's tests, its
// benchmark and the CI scripts that drive real clients (Claude Code, the
// SDKs) run against it.
//
// What it answers, per conversation (the X-Claude-Code-Session-Id header
// plus x-claude-code-agent-id, else the x-recall-session header, else one
// default conversation):
//
//   - a summarization turn — the last user message's text (trailing system
//     turns skipped) contains one of Script.SummaryMarkers,
//     case-insensitive — is answered with
//     Script.Summary as text (stop_reason end_turn);
//   - otherwise, while the conversation got fewer than Script.ToolCalls tool
//     calls (Script.AgentToolCalls for a subagent, one with an
//     x-claude-code-agent-id), a call of tool Script.ToolName with input
//     {"command": Script.Command with {i} replaced by the call's number,
//     "description": "..."} (stop_reason tool_use);
//   - then Script.Final as text.
//
// Usage reports input_tokens as the request body's length / 4, so a client
// that tracks its context from usage (Claude Code) compacts as it would
// with a real model. Script.Reply, when set, may answer a request itself
// (an error status, a custom body).
//
// Every request is recorded (Requests; GET /_upstream/requests serves them
// as JSON, DELETE resets them and the conversations) with its headers and
// body as received — provider keys included, as a real upstream would see
// them — and, for Anthropic Messages requests, Invalid: the structural rule
// of pkg/memory.ValidateContext the request's messages break ("" = valid;
// role "system" turns, which Claude Code sends inside messages, are left out
// of the check).
//
// The command in ./cmd/upstream runs it from a shell:
//
//	go run ./services/gateway/gatewaytest/cmd/upstream -addr 127.0.0.1:0 -tool-calls 100
//
// prints "upstream listening on http://ADDR" once it serves, and serves
// until SIGINT or SIGTERM. Upstream is safe for concurrent use.
package gatewaytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Script says what the upstream answers.
type Script struct {
	// ToolCalls is how many tool calls a main conversation gets before
	// the final answer; AgentToolCalls a subagent's.
	ToolCalls      int
	AgentToolCalls int
	// ToolName is the tool called (default "Bash").
	ToolName string
	// Command is the tool input's command; {i} is replaced by the call's
	// number, from 1 (default "echo tool call {i}").
	Command string
	// Final is the final answer's text (default "Done.").
	Final string
	// Summary answers a summarization turn (default a short <summary>).
	Summary string
	// SummaryMarkers recognize a summarization turn (default
	// DefaultSummaryMarkers).
	SummaryMarkers []string
	// ChunkBytes is the size of the text deltas of a stream (default 16).
	ChunkBytes int
	// Delay is waited before each stream event after the first (default
	// none): a model's pace, to see that a stream is forwarded as it
	// arrives.
	Delay time.Duration
	// Reply, when set, is asked first; a non-nil Reply is written as is.
	Reply func(r *Request) *Reply
}

// DefaultSummaryMarkers recognize the summarization turns of Claude Code
// and Codex.
var DefaultSummaryMarkers = []string{"detailed summary of the conversation", "create a summary", "summarize the conversation"}

// Reply is a scripted answer written as is.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Request is one request the upstream received.
type Request struct {
	N      int         `json:"n"` // 1 for the first request
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query,omitempty"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
	// API is "anthropic.messages", "anthropic.count_tokens",
	// "openai.chat", "openai.responses", "openai.compact" or "other".
	API string `json:"api"`
	// Conversation is the conversation key (see the package comment).
	Conversation  string `json:"conversation"`
	Stream        bool   `json:"stream"`
	Summarization bool   `json:"summarization"`
	// Invalid is the broken rule of an Anthropic request's messages.
	Invalid string `json:"invalid,omitempty"`
}

// Upstream is the scripted upstream, an http.Handler.
type Upstream struct {
	script Script
	mu     sync.Mutex
	reqs   []Request
	calls  map[string]int // tool calls given per conversation
}

// New returns an upstream answering from s.
func New(s Script) *Upstream {
	if s.ToolName == "" {
		s.ToolName = "Bash"
	}
	if s.Command == "" {
		s.Command = "echo tool call {i}"
	}
	if s.Final == "" {
		s.Final = "Done."
	}
	if s.Summary == "" {
		s.Summary = "<summary>\n1. Primary Request and Intent: the scripted task.\n2. Current Work: running the scripted tool calls.\n</summary>"
	}
	if s.SummaryMarkers == nil {
		s.SummaryMarkers = DefaultSummaryMarkers
	}
	if s.ChunkBytes <= 0 {
		s.ChunkBytes = 16
	}
	return &Upstream{script: s, calls: map[string]int{}}
}

// Requests returns a copy of the requests received so far, in order.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.reqs...)
}

// Reset forgets the requests and the conversations.
func (u *Upstream) Reset() {
	u.mu.Lock()
	u.reqs, u.calls = nil, map[string]int{}
	u.mu.Unlock()
}

// ServeHTTP answers one request (see the package comment).
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_upstream/requests" {
		u.serveRequests(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body,
		API: apiOf(r.URL.Path), Conversation: conversationOf(r.Header)}
	var answer func()
	switch req.API {
	case "anthropic.messages":
		answer = u.anthropic(w, req)
	case "anthropic.count_tokens":
		answer = func() { writeJSON(w, 200, map[string]int{"input_tokens": len(body) / 4}) }
	case "openai.chat":
		answer = u.chat(w, req)
	case "openai.responses", "openai.compact":
		answer = u.responses(w, req)
	default:
		answer = func() {
			writeJSON(w, 404, map[string]any{"type": "error", "error": map[string]string{"type": "not_found_error", "message": "no route " + r.URL.Path}})
		}
	}
	u.record(req)
	if u.script.Reply != nil {
		if rep := u.script.Reply(req); rep != nil {
			writeReply(w, rep)
			return
		}
	}
	answer()
}

// record appends req, numbering it.
func (u *Upstream) record(req *Request) {
	u.mu.Lock()
	req.N = len(u.reqs) + 1
	u.reqs = append(u.reqs, *req)
	u.mu.Unlock()
}

// nextCall counts a tool call of conversation conv and returns its number,
// or 0 when the conversation had its limit.
func (u *Upstream) nextCall(conv string, limit int) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.calls[conv] >= limit {
		return 0
	}
	u.calls[conv]++
	return u.calls[conv]
}

func (u *Upstream) limit(conv string) int {
	if strings.Contains(conv, "/agent:") {
		return u.script.AgentToolCalls
	}
	return u.script.ToolCalls
}

// isSummarization reports whether text holds a summary marker.
func (u *Upstream) isSummarization(text string) bool {
	t := strings.ToLower(text)
	for _, m := range u.script.SummaryMarkers {
		if m != "" && strings.Contains(t, strings.ToLower(m)) {
			return true
		}
	}
	return false
}

func (u *Upstream) command(i int) string {
	return strings.ReplaceAll(u.script.Command, "{i}", fmt.Sprint(i))
}

func (u *Upstream) serveRequests(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		u.Reset()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, 200, u.Requests())
}

func apiOf(path string) string {
	switch path {
	case "/v1/messages":
		return "anthropic.messages"
	case "/v1/messages/count_tokens":
		return "anthropic.count_tokens"
	case "/v1/chat/completions":
		return "openai.chat"
	case "/v1/responses":
		return "openai.responses"
	case "/v1/responses/compact":
		return "openai.compact"
	}
	return "other"
}

func conversationOf(h http.Header) string {
	conv := h.Get("X-Claude-Code-Session-Id")
	if conv == "" {
		conv = h.Get("X-Recall-Session")
	}
	if conv == "" {
		conv = "default"
	}
	if a := h.Get("X-Claude-Code-Agent-Id"); a != "" {
		conv += "/agent:" + a
	}
	return conv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeReply(w http.ResponseWriter, rep *Reply) {
	for k, vs := range rep.Header {
		w.Header()[k] = vs
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	status := rep.Status
	if status == 0 {
		status = 200
	}
	w.WriteHeader(status)
	_, _ = w.Write(rep.Body)
}

// sse writes server-sent events, flushing each, waiting Delay between
// them.
type sse struct {
	w     http.ResponseWriter
	delay time.Duration
	n     int
}

func newSSE(w http.ResponseWriter, delay time.Duration) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	return &sse{w: w, delay: delay}
}

// event writes one event (name "" writes a data-only event).
func (s *sse) event(name string, data any) {
	if s.n > 0 && s.delay > 0 {
		time.Sleep(s.delay)
	}
	s.n++
	b, ok := data.([]byte)
	if !ok {
		b, _ = json.Marshal(data)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// chunks splits s into pieces of at most n bytes (one empty piece for "").
func chunks(s string, n int) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for len(s) > n {
		k := n
		for k > 1 && !utf8.RuneStart(s[k]) {
			k--
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return append(out, s)
}
