package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// Defaults of the real providers.
const (
	DefaultAnthropicModel   = "claude-sonnet-4-5"
	DefaultAnthropicBaseURL = "https://api.anthropic.com/"
	DefaultOpenAIModel      = "gpt-4.1-mini"
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1/"
	DefaultMaxTokens        = 8192
	DefaultTimeout          = 120 * time.Second
)

// ClientOptions configure a real provider.
type ClientOptions struct {
	APIKey  string
	Model   string
	BaseURL string
	// MaxTokens is used when a Request has no MaxTokens.
	MaxTokens int
	// Timeout bounds one HTTP call (0: DefaultTimeout).
	Timeout time.Duration
	// HTTPClient replaces http.DefaultClient.
	HTTPClient *http.Client
}

func (o *ClientOptions) defaults(model, baseURL string) {
	if o.Model == "" {
		o.Model = model
	}
	if o.BaseURL == "" {
		o.BaseURL = baseURL
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
}

// AnthropicProvider calls the Anthropic Messages API with
// anthropic-sdk-go. The SDK's own retries are disabled: wrap it with
// WithRetry.
type AnthropicProvider struct {
	client anthropic.Client
	opts   ClientOptions
}

// NewAnthropic returns an Anthropic provider.
func NewAnthropic(opts ClientOptions) *AnthropicProvider {
	opts.defaults(DefaultAnthropicModel, DefaultAnthropicBaseURL)
	c := anthropic.NewClient(
		option.WithAPIKey(opts.APIKey),
		option.WithBaseURL(opts.BaseURL),
		option.WithMaxRetries(0),
		option.WithHTTPClient(opts.HTTPClient),
	)
	return &AnthropicProvider{client: c, opts: opts}
}

// Name implements Provider.
func (p *AnthropicProvider) Name() string { return KindAnthropic }

// Model implements Provider.
func (p *AnthropicProvider) Model() string { return p.opts.Model }

// Complete implements Provider. Thinking blocks of the conversation are not
// sent; a cache_control breakpoint (ephemeral) marks the last block of
// Messages[req.CacheAfter].
func (p *AnthropicProvider) Complete(ctx context.Context, req Request) (*Response, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	msg, err := p.client.Messages.New(callCtx, params)
	if err != nil {
		return nil, classify(ctx, "anthropic", err)
	}
	resp := &Response{
		StopReason: string(msg.StopReason),
		Model:      msg.Model,
		Usage: events.TokenUsage{
			InputTokens:         msg.Usage.InputTokens,
			OutputTokens:        msg.Usage.OutputTokens,
			CacheReadTokens:     msg.Usage.CacheReadInputTokens,
			CacheCreationTokens: msg.Usage.CacheCreationInputTokens,
		},
	}
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: b.ID, Name: b.Name, Input: append(json.RawMessage(nil), b.Input...)})
		}
	}
	resp.Text = strings.Join(text, "\n")
	if resp.Model == "" {
		resp.Model = p.opts.Model
	}
	return resp, nil
}

func (p *AnthropicProvider) params(req Request) (anthropic.MessageNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.opts.MaxTokens
	}
	params := anthropic.MessageNewParams{
		Model:     anthropic.Model(p.opts.Model),
		MaxTokens: int64(maxTokens),
	}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	cacheAt := -1 // index in params.Messages
	for i := range req.Messages {
		m := &req.Messages[i]
		blocks := anthropicBlocks(m.Content)
		if len(blocks) > 0 {
			if m.Role == events.RoleAssistant {
				params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
			} else {
				params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
			}
		}
		if i == req.CacheAfter && len(params.Messages) > 0 {
			cacheAt = len(params.Messages) - 1
		}
	}
	if cacheAt >= 0 {
		blocks := params.Messages[cacheAt].Content
		if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
			*cc = anthropic.NewCacheControlEphemeralParam()
		}
	}
	for _, t := range req.Tools {
		schema, err := anthropicSchema(t.InputSchema)
		if err != nil {
			return params, fmt.Errorf("converting tool %s: %w", t.Name, err)
		}
		tp := &anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: tp})
	}
	return params, nil
}

func anthropicSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	var m map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			return anthropic.ToolInputSchemaParam{}, fmt.Errorf("decoding input schema: %w", err)
		}
	}
	s := anthropic.ToolInputSchemaParam{Properties: m["properties"]}
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				s.Required = append(s.Required, name)
			}
		}
	}
	for k, v := range m {
		if k != "properties" && k != "required" && k != "type" {
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

// anthropicBlocks converts content; thinking blocks and blank texts are
// dropped (the API rejects blank text blocks).
func anthropicBlocks(c events.Content) []anthropic.ContentBlockParamUnion {
	var out []anthropic.ContentBlockParamUnion
	for i := range c {
		b := &c[i]
		switch b.Type {
		case events.BlockText:
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, anthropic.NewTextBlock(b.Text))
			}
		case events.BlockToolUse:
			out = append(out, anthropic.ContentBlockParamUnion{OfToolUse: &anthropic.ToolUseBlockParam{
				ID: b.ID, Name: b.Name, Input: objectInput(b.Input),
			}})
		case events.BlockToolResult:
			tr := &anthropic.ToolResultBlockParam{ToolUseID: b.ToolUseID}
			if b.IsError {
				tr.IsError = param.NewOpt(true)
			}
			for j := range b.Content {
				rb := &b.Content[j]
				switch rb.Type {
				case events.BlockText:
					if strings.TrimSpace(rb.Text) != "" {
						tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: rb.Text}})
					}
				case events.BlockImage:
					img := param.Override[anthropic.ImageBlockParam](rawBlock(rb))
					tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &img})
				}
			}
			out = append(out, anthropic.ContentBlockParamUnion{OfToolResult: tr})
		case events.BlockImage:
			img := param.Override[anthropic.ImageBlockParam](rawBlock(b))
			out = append(out, anthropic.ContentBlockParamUnion{OfImage: &img})
		case events.BlockDocument:
			doc := param.Override[anthropic.DocumentBlockParam](rawBlock(b))
			out = append(out, anthropic.ContentBlockParamUnion{OfDocument: &doc})
		}
	}
	return out
}

// rawBlock is an image or document block as the API takes it.
func rawBlock(b *events.Block) json.RawMessage {
	raw, _ := json.Marshal(struct {
		Type   string          `json:"type"`
		Source json.RawMessage `json:"source,omitempty"`
	}{b.Type, b.Source})
	return raw
}

// objectInput is a tool input usable in a request: a JSON object, or {}
// when the recorded input is missing or not an object.
func objectInput(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil || m == nil {
		return json.RawMessage(`{}`)
	}
	return raw
}

// classify wraps transient failures (transport errors, timeouts of the call
// itself, 408, 409, 429, 5xx) with ErrRetryable, and marks the wait an
// answer asks for (retryAfter) with retry.Wait. ctx is the caller's
// context: when it is done, its error is returned as is.
func classify(ctx context.Context, provider string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("calling %s: %w", provider, ctx.Err())
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return statusError(provider, ae.StatusCode, ae.Response, err)
	}
	var oe *openaiError
	if errors.As(err, &oe) {
		return statusError(provider, oe.StatusCode, oe.Response, err)
	}
	return fmt.Errorf("%w: calling %s: %w", ErrRetryable, provider, err)
}

func statusError(provider string, status int, resp *http.Response, err error) error {
	if status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500 {
		return retry.Wait(fmt.Errorf("%w: calling %s: status %d: %w", ErrRetryable, provider, status, err), retryAfter(resp, time.Now()))
	}
	return fmt.Errorf("calling %s: status %d: %w", provider, status, err)
}

// retryAfter is the wait an answer asks for before the next call: its
// retry-after-ms header (milliseconds, which Anthropic and OpenAI send), or
// its Retry-After (seconds or an HTTP date); 0 when it asks for none.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	if resp == nil {
		return 0
	}
	if ms, err := strconv.ParseFloat(resp.Header.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := resp.Header.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}
