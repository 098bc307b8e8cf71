package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/recallhq/recall/pkg/events"
)

type openaiError = openai.Error

// OpenAIProvider calls an OpenAI-compatible Chat Completions endpoint with
// openai-go: OpenAI itself, or vLLM, Ollama, llama.cpp, LiteLLM through
// BaseURL. The SDK's own retries are disabled: wrap it with WithRetry.
//
// Anthropic-shaped conversations are converted: tool_use blocks become the
// assistant's tool_calls, tool_result blocks become role "tool" messages
// (placed before the rest of their user message), thinking blocks are
// dropped, images become image_url parts (base64 sources as data URLs) and
// documents a short placeholder. Against OpenAI's own API the output bound is
// sent as max_completion_tokens; against any other base URL as max_tokens,
// which OpenAI-compatible servers understand.
type OpenAIProvider struct {
	client   openai.Client
	opts     ClientOptions
	official bool
}

// NewOpenAI returns an OpenAI(-compatible) provider.
func NewOpenAI(opts ClientOptions) *OpenAIProvider {
	official := opts.BaseURL == "" || strings.HasPrefix(opts.BaseURL, "https://api.openai.com")
	opts.defaults(DefaultOpenAIModel, DefaultOpenAIBaseURL)
	c := openai.NewClient(
		option.WithAPIKey(opts.APIKey),
		option.WithBaseURL(opts.BaseURL),
		option.WithMaxRetries(0),
		option.WithHTTPClient(opts.HTTPClient),
	)
	return &OpenAIProvider{client: c, opts: opts, official: official}
}

// Name implements Provider.
func (p *OpenAIProvider) Name() string { return KindOpenAI }

// Model implements Provider.
func (p *OpenAIProvider) Model() string { return p.opts.Model }

// Complete implements Provider. Usage reports cached prompt tokens as
// CacheReadTokens and the rest of the prompt as InputTokens. CacheAfter is
// ignored (OpenAI caches prefixes automatically).
func (p *OpenAIProvider) Complete(ctx context.Context, req Request) (*Response, error) {
	params, err := p.params(req)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	cc, err := p.client.Chat.Completions.New(callCtx, params)
	if err != nil {
		return nil, classify(ctx, "openai", err)
	}
	cached := cc.Usage.PromptTokensDetails.CachedTokens
	resp := &Response{
		Model: cc.Model,
		Usage: events.TokenUsage{
			InputTokens:     cc.Usage.PromptTokens - cached,
			OutputTokens:    cc.Usage.CompletionTokens,
			CacheReadTokens: cached,
		},
	}
	if resp.Model == "" {
		resp.Model = p.opts.Model
	}
	if len(cc.Choices) == 0 {
		return resp, nil
	}
	ch := cc.Choices[0]
	resp.Text = ch.Message.Content
	switch ch.FinishReason {
	case "tool_calls":
		resp.StopReason = "tool_use"
	case "length":
		resp.StopReason = "max_tokens"
	case "stop":
		resp.StopReason = "end_turn"
	default:
		resp.StopReason = ch.FinishReason
	}
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(tc.Function.Arguments)})
	}
	return resp, nil
}

func (p *OpenAIProvider) params(req Request) (openai.ChatCompletionNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = p.opts.MaxTokens
	}
	params := openai.ChatCompletionNewParams{Model: p.opts.Model}
	if p.official {
		params.MaxCompletionTokens = param.NewOpt(int64(maxTokens))
	} else {
		params.MaxTokens = param.NewOpt(int64(maxTokens))
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for i := range req.Messages {
		params.Messages = append(params.Messages, openaiMessages(&req.Messages[i])...)
	}
	for _, t := range req.Tools {
		var schema shared.FunctionParameters
		if len(t.InputSchema) > 0 {
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
				return params, fmt.Errorf("converting tool %s: decoding input schema: %w", t.Name, err)
			}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return params, nil
}

// openaiMessages converts one Anthropic-shaped message into zero or more
// chat messages.
func openaiMessages(m *events.Message) []openai.ChatCompletionMessageParamUnion {
	var out []openai.ChatCompletionMessageParamUnion
	if m.Role == events.RoleAssistant {
		var text []string
		var calls []openai.ChatCompletionMessageToolCallUnionParam
		for i := range m.Content {
			b := &m.Content[i]
			switch b.Type {
			case events.BlockText:
				if b.Text != "" {
					text = append(text, b.Text)
				}
			case events.BlockToolUse:
				calls = append(calls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       b.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: string(compactJSON(objectInput(b.Input)))},
					},
				})
			}
		}
		if len(text) == 0 && len(calls) == 0 {
			return nil
		}
		a := &openai.ChatCompletionAssistantMessageParam{ToolCalls: calls}
		if len(text) > 0 {
			a.Content.OfString = param.NewOpt(strings.Join(text, "\n"))
		}
		return append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: a})
	}

	var parts []openai.ChatCompletionContentPartUnionParam
	for i := range m.Content {
		b := &m.Content[i]
		switch b.Type {
		case events.BlockText:
			if b.Text != "" {
				parts = append(parts, openai.TextContentPart(b.Text))
			}
		case events.BlockImage:
			if u := imageURL(b.Source); u != "" {
				parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: u}))
			} else {
				parts = append(parts, openai.TextContentPart("[image omitted]"))
			}
		case events.BlockDocument:
			parts = append(parts, openai.TextContentPart("[document omitted]"))
		case events.BlockToolResult:
			out = append(out, openai.ToolMessage(toolResultText(b), b.ToolUseID))
		}
	}
	switch {
	case len(parts) == 1 && parts[0].OfText != nil:
		out = append(out, openai.UserMessage(parts[0].OfText.Text))
	case len(parts) > 0:
		out = append(out, openai.UserMessage(parts))
	}
	return out
}

// toolResultText flattens a tool_result for a role "tool" message.
func toolResultText(b *events.Block) string {
	var parts []string
	for i := range b.Content {
		switch c := &b.Content[i]; c.Type {
		case events.BlockText:
			parts = append(parts, c.Text)
		case events.BlockImage:
			parts = append(parts, "[image omitted]")
		}
	}
	s := strings.Join(parts, "\n")
	if b.IsError {
		s = "Error: " + s
	}
	if s == "" {
		s = "(no output)"
	}
	return s
}

// imageURL turns an Anthropic image source into an image_url: a data URL for
// base64 sources, the URL for url sources, "" otherwise.
func imageURL(src json.RawMessage) string {
	var s struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if json.Unmarshal(src, &s) != nil {
		return ""
	}
	switch s.Type {
	case "base64":
		if s.MediaType != "" && s.Data != "" {
			return "data:" + s.MediaType + ";base64," + s.Data
		}
	case "url":
		return s.URL
	}
	return ""
}

func compactJSON(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
