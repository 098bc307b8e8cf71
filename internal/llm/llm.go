// Package llm is Recall's narrow view of a language model: one request with a
// system prompt, a conversation in Anthropic Messages shape and a set of
// tools; one response with text and tool calls. Providers translate it to
// their native API (Anthropic Messages, OpenAI Chat Completions) or, for the
// offline provider, answer deterministically without a network.
package llm

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// Tool is a tool offered to the model.
type Tool struct {
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool input (an object schema).
	InputSchema json.RawMessage
}

// Request is one model call.
type Request struct {
	System string
	// Messages alternate user and assistant turns in Anthropic shape:
	// tool_use blocks in assistant messages, tool_result blocks in user
	// messages. Providers convert to their native shape.
	Messages []events.Message
	Tools    []Tool
	// MaxTokens bounds the output.
	MaxTokens int
	// CacheAfter, when >= 0, asks providers that support prompt caching to
	// place a cache breakpoint after Messages[CacheAfter] (Anthropic
	// cache_control), so consecutive extractions of a session reuse the
	// cached prefix. -1 disables.
	CacheAfter int

	// Notes and NotesPath describe the memory document being edited. Real
	// providers ignore them (the prompt already carries the notes); the
	// offline provider uses them to derive its edits.
	Notes     string
	NotesPath string
	// Task says what the call is for: TaskExtract (empty), TaskIndex or
	// TaskQuery. Real providers ignore it; the offline provider answers by
	// it.
	Task string
	// Passages and Question describe a TaskQuery call for the offline
	// provider (real providers read the prompt).
	Passages []memory.Passage
	Question string
	// Batch and MemoryTypes describe a TaskLTM call for the offline
	// provider: the committed messages and the types of the phase.
	Batch       []*events.Message
	MemoryTypes []string
}

// Tasks of a model call.
const (
	TaskExtract = ""
	TaskIndex   = "index"
	TaskQuery   = "query"
	TaskLTM     = "ltm"
)

// MemoryWriteTool is the long-term memory write tool's name; its input is
// {"type", "content", "peer_id", "ranges"} (offline calls fill the first
// three).
const MemoryWriteTool = "memory_write"

// ToolCall is a tool invocation in a response.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// Response is one model answer.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	StopReason string
	Model      string
	Usage      events.TokenUsage
	// UpToDate is set by a provider that decided, without error, that the
	// notes need no edit (the offline provider when nothing changed). A
	// response without tool calls is otherwise an invalid extraction answer.
	UpToDate bool
}

// Provider is a model endpoint. Implementations are safe for concurrent use.
type Provider interface {
	// Name is the provider kind: "anthropic", "openai" or "offline".
	Name() string
	// Model is the model the provider calls.
	Model() string
	// Complete runs one model call. Errors that may succeed on retry
	// (transport failures, 429, 5xx) wrap ErrRetryable.
	Complete(ctx context.Context, req Request) (*Response, error)
}

// ErrRetryable marks transient provider errors.
var ErrRetryable = errors.New("retryable provider error")
