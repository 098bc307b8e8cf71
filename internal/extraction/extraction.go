// Package extraction runs the forked edit: it shows a model the session's
// transcript and its current memory document, offers exactly one tool (an
// Edit of that document), applies the model's edits through the guards of
// pkg/memory and returns each outcome to the model for a few more turns.
//
// It knows nothing about NATS: the extractor service reads the transcript and
// the memory, calls BuildConversation and Run, and commits Output.Notes.
package extraction

import (
	"context"
	"errors"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
)

// Defaults of Input.
const (
	// DefaultMaxTurns bounds the model calls of one extraction.
	DefaultMaxTurns = 4
	// DefaultMaxOutputTokens bounds each model answer.
	DefaultMaxOutputTokens = 8192
	// DefaultMaxConversationTokens caps the transcript sent to the model.
	DefaultMaxConversationTokens = 150000
	// DefaultNoToolRetries is how many times a call that produced no valid
	// tool call at all is repeated before ErrNoValidToolCall.
	DefaultNoToolRetries = 2
)

// Errors.
var (
	// ErrNoValidToolCall: the model answered without any usable Edit call
	// (text only, or malformed tool input) DefaultNoToolRetries+1 times.
	ErrNoValidToolCall = errors.New("model produced no valid tool call")
	// ErrNoMessages: there is nothing to summarize.
	ErrNoMessages = errors.New("no messages to summarize")
)

// Input is one extraction.
type Input struct {
	Tenant  string
	Session string
	// Notes is the current memory document (or the template when the
	// session has none yet).
	Notes string
	// Template is the template the notes follow (default or tenant's).
	Template string
	// CustomPrompt replaces the default extraction prompt when non-empty
	// ({{currentNotes}} and {{notesPath}} are substituted).
	CustomPrompt string
	// System is the system prompt of the fork; empty uses a short default.
	System string
	// Conversation is the forked conversation (see BuildConversation).
	Conversation []events.Message
	// MaxTurns bounds the model calls that may apply edits; 0 means
	// DefaultMaxTurns.
	MaxTurns int
	// MaxTokens bounds each model answer; 0 means DefaultMaxOutputTokens.
	MaxTokens int
}

// Output is the result of a successful extraction.
type Output struct {
	// Notes is the document after every accepted edit.
	Notes string
	// Usage sums every model call, retries included.
	Usage events.TokenUsage
	// Turns is the number of model calls that produced an answer.
	Turns         int
	EditsApplied  int
	EditsRejected int
	Model         string
	Provider      string
}

// Run performs the forked edit with p. It returns an error wrapping
// ErrNoValidToolCall when the model never produced a usable tool call, one
// wrapping llm.ErrRetryable when the provider kept failing transiently (wrap
// p with llm.WithRetry to retry those), or ctx's error. Run is safe for
// concurrent use with distinct inputs.
func Run(ctx context.Context, p llm.Provider, in Input) (*Output, error) {
	return nil, errors.New("extraction: not implemented yet")
}
