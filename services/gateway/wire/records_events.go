package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/recallhq/recall/pkg/events"
)

// errStreamError is an error event in a stream (the reply is not complete).
var errStreamError = errors.New("the stream carried an error event")

// anthropicEvent folds one Messages stream event into the reply.
func (a *Assembler) anthropicEvent(data []byte) error {
	var ev struct {
		Type    string          `json:"type"`
		Index   int             `json:"index"`
		Message *Response       `json:"message"`
		Block   json.RawMessage `json:"content_block"`
		Delta   struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
			StopReason  string `json:"stop_reason"`
		} `json:"delta"`
		Usage *events.Usage `json:"usage"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("%w: a stream event: %v", ErrBadBody, err)
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			a.reply.ID, a.reply.Model, a.reply.Usage = ev.Message.ID, ev.Message.Model, ev.Message.Usage
		}
	case "content_block_start":
		p := &partial{}
		if err := json.Unmarshal(ev.Block, &p.block); err != nil {
			return fmt.Errorf("%w: content_block_start: %v", ErrBadBody, err)
		}
		if p.block.Type == events.BlockToolUse {
			p.block.Input = nil // streamed as partial_json
		}
		a.blocks[ev.Index] = p
		a.order = append(a.order, ev.Index)
		return a.grow(len(ev.Block))
	case "content_block_delta":
		p := a.blocks[ev.Index]
		if p == nil {
			return fmt.Errorf("%w: a delta of block %d before its start", ErrBadBody, ev.Index)
		}
		d := &ev.Delta
		p.block.Text += d.Text
		p.block.Thinking += d.Thinking
		p.block.Signature += d.Signature
		p.input.WriteString(d.PartialJSON)
		return a.grow(len(d.Text) + len(d.Thinking) + len(d.Signature) + len(d.PartialJSON))
	case "message_delta":
		a.reply.StopReason = ev.Delta.StopReason
		if u := ev.Usage; u != nil {
			a.reply.Usage.OutputTokens = u.OutputTokens
			if u.InputTokens > 0 {
				a.reply.Usage.InputTokens = u.InputTokens
			}
		}
	case "message_stop":
		a.finishAnthropic()
	case "error":
		return errStreamError
	}
	return nil
}

func (a *Assembler) finishAnthropic() {
	c := make(events.Content, 0, len(a.order))
	for _, i := range a.order {
		p := a.blocks[i]
		if p.block.Type == events.BlockToolUse {
			p.block.Input = json.RawMessage(p.input.String())
			if len(p.block.Input) == 0 {
				p.block.Input = json.RawMessage("{}")
			}
		}
		c = append(c, p.block)
	}
	a.setAnthropic(a.reply.ID, a.reply.Model, a.reply.StopReason, c, a.reply.Usage)
	a.blocks, a.order, a.done = nil, nil, true
}

// chatUsage is Chat Completions' and Responses' usage.
type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	PromptDetails    struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// usage is u in Anthropic's shape: OpenAI's input tokens include the
// cached ones, Anthropic's do not.
func (u *chatUsage) usage() events.Usage {
	in, cached := u.PromptTokens+u.InputTokens, u.PromptDetails.CachedTokens+u.InputDetails.CachedTokens
	return events.Usage{InputTokens: in - cached, CacheReadInputTokens: cached, OutputTokens: u.CompletionTokens + u.OutputTokens}
}

type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message      ChatMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	} `json:"choices"`
	Usage chatUsage `json:"usage"`
}

// chatChunk folds one Chat Completions stream chunk into the reply.
func (a *Assembler) chatChunk(data []byte) error {
	if string(data) == "[DONE]" {
		return a.finishChat()
	}
	var ch struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					Index int `json:"index"`
					ChatToolCall
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *chatUsage      `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &ch); err != nil {
		return fmt.Errorf("%w: a stream chunk: %v", ErrBadBody, err)
	}
	if len(ch.Error) > 0 {
		return errStreamError
	}
	a.reply.ID, a.reply.Model = ch.ID, ch.Model
	if ch.Usage != nil {
		a.reply.Usage = ch.Usage.usage()
	}
	if a.reply.Chat == nil {
		a.reply.Chat = &ChatMessage{Role: events.RoleAssistant}
	}
	text := a.blocks[-1]
	if text == nil {
		text = &partial{}
		a.blocks[-1] = text
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // capture keeps the first choice
		}
		text.input.WriteString(c.Delta.Content)
		n := len(c.Delta.Content)
		for _, tc := range c.Delta.ToolCalls {
			p := a.blocks[tc.Index]
			if p == nil {
				p = &partial{}
				a.blocks[tc.Index] = p
			}
			if tc.ID != "" {
				p.tc.ID, p.tc.Type = tc.ID, tc.Type
			}
			p.tc.Function.Name += tc.Function.Name
			p.tc.Function.Arguments += tc.Function.Arguments
			n += len(tc.Function.Arguments) + len(tc.Function.Name)
		}
		if c.FinishReason != "" {
			a.reply.StopReason = c.FinishReason
		}
		if err := a.grow(n); err != nil {
			return err
		}
	}
	return nil
}

func (a *Assembler) finishChat() error {
	if a.reply.Chat == nil || a.reply.StopReason == "" {
		return errors.New("the chat stream ended without a finish reason")
	}
	idx := make([]int, 0, len(a.blocks))
	for i := range a.blocks {
		if i >= 0 {
			idx = append(idx, i)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		a.reply.Chat.ToolCalls = append(a.reply.Chat.ToolCalls, a.blocks[i].tc)
	}
	if t := a.blocks[-1]; t != nil && t.input.Len() > 0 {
		a.reply.Chat.Content, _ = json.Marshal(t.input.String())
	}
	a.blocks, a.done = nil, true
	return nil
}

// responsesEvent keeps the response of a Responses stream's
// response.completed event (it holds the whole output and the usage).
func (a *Assembler) responsesEvent(name string, data []byte) error {
	var ev struct {
		Type     string          `json:"type"`
		Response json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("%w: a stream event: %v", ErrBadBody, err)
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case "response.created", "response.in_progress":
		var r struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(ev.Response, &r)
		a.reply.ID = r.ID
	case "response.completed":
		if err := a.setResponses(ev.Response); err != nil {
			return err
		}
		a.done = true
	case "response.failed", "response.incomplete", "error":
		return errStreamError
	}
	return nil
}

// setResponses sets the reply from a Responses response object.
func (a *Assembler) setResponses(b []byte) error {
	var r struct {
		ID     string            `json:"id"`
		Object string            `json:"object"`
		Model  string            `json:"model"`
		Status string            `json:"status"`
		Output []json.RawMessage `json:"output"`
		Usage  chatUsage         `json:"usage"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Object != "response" {
		return fmt.Errorf("%w: not a response (%v)", ErrBadBody, err)
	}
	a.reply = Reply{ID: r.ID, Model: r.Model, StopReason: r.Status, Usage: r.Usage.usage()}
	for i, raw := range r.Output {
		var it Item
		if err := json.Unmarshal(raw, &it); err != nil {
			return fmt.Errorf("%w: output[%d]: %v", ErrBadBody, i, err)
		}
		it.Raw = raw
		a.reply.Items = append(a.reply.Items, it)
	}
	return nil
}
