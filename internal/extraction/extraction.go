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
	"encoding/json"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/pkg/retry"
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
	// (malformed tool input, or an answer cut off at its token limit)
	// DefaultNoToolRetries+1 times. A plain text answer with no tool call is
	// not this error: it says the notes are already current.
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
	// UpToDate reports that the model made no Edit call because the notes
	// already said everything (a text answer, or the provider said so).
	UpToDate bool
	Model    string
	Provider string
}

// DefaultSystem is the fork's system prompt when Input.System is empty.
const DefaultSystem = "You maintain the session notes of a coding-agent session. The conversation below is the session so far. " +
	"Follow the final instruction exactly; your only tool is Edit on the notes file."

// Run performs the forked edit with p: it sends the conversation followed by
// the extraction prompt (memory.BuildPrompt: default or custom, with the
// size reminders), offers exactly one tool (Edit, memory.EditToolSchema),
// places the cache breakpoint on the last conversation message, applies each
// tool call with memory.ApplyToolCall, answers every call with a tool_result
// (success text, the deny text or the edit error, as is_error) and lets the
// model continue until it stops calling tools, every edit of a turn
// succeeded, or MaxTurns model turns were used.
//
// A first answer with no tool call at all is a success: the model found
// nothing to change (Output.UpToDate, Notes unchanged). When the first
// answer's tool calls are all malformed Edits, or it was cut off at its token
// limit without a tool call, the call is repeated up to DefaultNoToolRetries
// times; then Run returns an error wrapping ErrNoValidToolCall. Tool choice
// stays "auto" with both APIs: forcing a tool call would force an edit when
// nothing changed. Provider errors are returned wrapped
// (llm.ErrRetryable ones after the provider's own retries: wrap p with
// llm.WithRetry). A run whose edits were all rejected still returns an
// Output (EditsApplied 0, Notes unchanged).
//
// Every model call is a span ("chat <model>") on the global tracer with
// GenAI semantic-convention attributes. Run is safe for concurrent use.
func Run(ctx context.Context, p llm.Provider, in Input) (*Output, error) {
	if len(in.Conversation) == 0 {
		return nil, ErrNoMessages
	}
	maxTurns := in.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	maxTokens := in.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxOutputTokens
	}
	system := in.System
	if system == "" {
		system = DefaultSystem
	}
	notes := in.Notes
	if notes == "" {
		notes = in.Template
	}
	if notes == "" {
		notes = memory.DefaultTemplate
	}
	path := memory.NotesPath(in.Tenant, in.Session)

	msgs := make([]events.Message, 0, len(in.Conversation)+1+2*maxTurns)
	msgs = append(msgs, in.Conversation...)
	msgs = append(msgs, events.Message{Role: events.RoleUser, Content: events.Content{{
		Type: events.BlockText, Text: memory.BuildPrompt(in.CustomPrompt, notes, path),
	}}})
	out := &Output{Notes: notes, Provider: p.Name(), Model: p.Model()}
	req := llm.Request{
		System:     system,
		Tools:      []llm.Tool{EditTool()},
		MaxTokens:  maxTokens,
		CacheAfter: len(in.Conversation) - 1,
		NotesPath:  path,
	}

	for turn := 0; turn < maxTurns; turn++ {
		req.Messages, req.Notes = msgs, out.Notes
		resp, err := answer(ctx, p, req, out, turn == 0)
		if err != nil {
			return nil, err
		}
		if len(resp.ToolCalls) == 0 {
			out.UpToDate = turn == 0
			break
		}
		assistant, results, failed := applyCalls(turn, resp, path, out)
		msgs = append(msgs, assistant, results)
		if !failed {
			break
		}
	}
	return out, nil
}

// reask bounds answer's asks of the first turn: at once, DefaultNoToolRetries
// times after the first.
var reask = retry.Policy{Attempts: DefaultNoToolRetries + 1}

// answer asks p for the next turn. The first turn's answer is asked again
// (up to DefaultNoToolRetries times, reask) while it is not valid
// (validAnswer); then the error wraps ErrNoValidToolCall.
func answer(ctx context.Context, p llm.Provider, req llm.Request, out *Output, first bool) (*llm.Response, error) {
	if !first {
		return call(ctx, p, req, out)
	}
	var resp *llm.Response
	asked := 0
	err := reask.Do(ctx, nil, "", func(ctx context.Context) error {
		asked++
		var err error
		if resp, err = call(ctx, p, req, out); err != nil {
			return retry.Permanent(err)
		}
		if !validAnswer(resp) {
			return ErrNoValidToolCall
		}
		return nil
	})
	if errors.Is(err, ErrNoValidToolCall) {
		return nil, fmt.Errorf("extracting memory after %d attempts: %w", asked, err)
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// applyCalls applies a turn's tool calls to out.Notes (memory.ApplyToolCall)
// and returns the turn as the model's message and the tool results sent
// back, and whether an edit failed.
func applyCalls(turn int, resp *llm.Response, path string, out *Output) (assistant, results events.Message, failed bool) {
	assistant = events.Message{Role: events.RoleAssistant}
	if resp.Text != "" {
		assistant.Content = append(assistant.Content, events.Block{Type: events.BlockText, Text: resp.Text})
	}
	results = events.Message{Role: events.RoleUser}
	for i, tc := range resp.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", turn, i)
		}
		assistant.Content = append(assistant.Content, events.Block{Type: events.BlockToolUse, ID: id, Name: tc.Name, Input: objectJSON(tc.Input)})
		doc, text, err := memory.ApplyToolCall(out.Notes, path, tc.Name, tc.Input)
		if err != nil {
			out.EditsRejected++
			failed = true
		} else {
			out.Notes = doc
			out.EditsApplied++
		}
		results.Content = append(results.Content, events.Block{
			Type: events.BlockToolResult, ToolUseID: id, IsError: err != nil,
			Content: events.Content{{Type: events.BlockText, Text: text}},
		})
	}
	return assistant, results, failed
}

// EditTool is the single tool offered to the fork.
func EditTool() llm.Tool {
	return llm.Tool{
		Name:        memory.EditToolName,
		Description: memory.EditToolDescription,
		InputSchema: json.RawMessage(memory.EditToolSchema),
	}
}

// validAnswer reports whether resp is a usable first answer: it has a tool
// call that is not a malformed Edit, or no tool call at all (nothing to
// change) and was not cut off at its token limit.
func validAnswer(resp *llm.Response) bool {
	if resp.UpToDate {
		return true
	}
	if len(resp.ToolCalls) == 0 {
		return !truncated(resp.StopReason)
	}
	for _, tc := range resp.ToolCalls {
		if tc.Name != memory.EditToolName {
			return true // denied, but a well-formed call the model can learn from
		}
		if _, err := memory.ParseEditInput(tc.Input); err == nil {
			return true
		}
	}
	return false
}

// truncated reports a stop reason that means the answer hit its token
// limit (Anthropic "max_tokens", OpenAI "length").
func truncated(stopReason string) bool {
	return stopReason == "max_tokens" || stopReason == "length"
}

// objectJSON is raw when it is a JSON object, else {} (a malformed input
// cannot be echoed back in the conversation).
func objectJSON(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return json.RawMessage(`{}`)
	}
	return raw
}

var tracer = otel.Tracer("recall/extraction")

// call runs one model call in a span and accounts its usage in out.
func call(ctx context.Context, p llm.Provider, req llm.Request, out *Output) (*llm.Response, error) {
	ctx, span := tracer.Start(ctx, "chat "+p.Model(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.system", p.Name()),
		attribute.String("gen_ai.provider.name", p.Name()),
		attribute.String("gen_ai.request.model", p.Model()),
		attribute.Int("gen_ai.request.max_tokens", req.MaxTokens),
		attribute.Int("recall.llm.messages", len(req.Messages)),
	))
	defer span.End()
	resp, err := p.Complete(ctx, req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("calling %s model: %w", p.Name(), err)
	}
	span.SetAttributes(
		attribute.String("gen_ai.response.model", resp.Model),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.StopReason}),
		attribute.Int64("gen_ai.usage.input_tokens", resp.Usage.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", resp.Usage.OutputTokens),
		attribute.Int64("gen_ai.usage.cache_read.input_tokens", resp.Usage.CacheReadTokens),
		attribute.Int64("gen_ai.usage.cache_creation.input_tokens", resp.Usage.CacheCreationTokens),
		attribute.Int("recall.llm.tool_calls", len(resp.ToolCalls)),
	)
	out.Usage = out.Usage.Add(resp.Usage)
	out.Turns++
	if resp.Model != "" {
		out.Model = resp.Model
	}
	return resp, nil
}
