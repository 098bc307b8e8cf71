package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/recallhq/recall/pkg/events"
)

// Capture decodes a request once, in the background, to turn it into
// records. Unlike DecodeMessages / DecodeChat / DecodeResponses, which keep
// every field and every message as sent (to re-encode an edited body), the
// ForRecords decoders keep only what records and sessions need: the
// messages decoded, without their raw form, and in Raw only the top-level
// fields the session rules read. A 20 MB body is thus held twice at most
// (the body and its decoded messages), not four times.

// sessionFields are the top-level fields the session rules read.
type sessionFields struct {
	Conversation     json.RawMessage `json:"conversation"`
	PromptCacheKey   json.RawMessage `json:"prompt_cache_key"`
	User             json.RawMessage `json:"user"`
	SafetyIdentifier json.RawMessage `json:"safety_identifier"`
	Tools            toolsPresent    `json:"tools"`
}

// toolsPresent decodes a tools array to whether it has any tool.
type toolsPresent bool

func (t *toolsPresent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*t = toolsPresent(len(b) > 2 && b[0] == '[' && !bytes.Equal(bytes.Join(bytes.Fields(b), nil), []byte("[]")))
	return nil
}

func (f *sessionFields) raw() map[string]json.RawMessage {
	raw := map[string]json.RawMessage{}
	for k, v := range map[string]json.RawMessage{"conversation": f.Conversation, "prompt_cache_key": f.PromptCacheKey,
		"user": f.User, "safety_identifier": f.SafetyIdentifier} {
		if len(v) > 0 {
			raw[k] = v
		}
	}
	if f.Tools {
		raw["tools"] = json.RawMessage(`[{}]`)
	}
	return raw
}

// DecodeMessagesForRecords decodes an Anthropic Messages request for
// capture (see above): Messages without Raw; Raw holds "tools" as [{}]
// when the request has tools.
func DecodeMessagesForRecords(body []byte) (*MessagesRequest, error) {
	var v struct {
		Model    string           `json:"model"`
		System   json.RawMessage  `json:"system"`
		Messages []events.Message `json:"messages"`
		Metadata *Metadata        `json:"metadata"`
		sessionFields
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	r := &MessagesRequest{Model: v.Model, System: v.System, Metadata: v.Metadata, Raw: v.raw(), Messages: make([]Msg, len(v.Messages))}
	for i := range v.Messages {
		r.Messages[i].Message = v.Messages[i]
	}
	return r, nil
}

// DecodeChatForRecords decodes a Chat Completions request for capture.
func DecodeChatForRecords(body []byte) (*ChatRequest, error) {
	var v struct {
		Model    string        `json:"model"`
		Messages []ChatMessage `json:"messages"`
		sessionFields
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	if v.Messages == nil {
		v.Messages = []ChatMessage{}
	}
	return &ChatRequest{Model: v.Model, Messages: v.Messages, Raw: v.raw()}, nil
}

// DecodeResponsesForRecords decodes a Responses request for capture; an
// item's Raw is kept only for custom tool calls (their input is in it).
func DecodeResponsesForRecords(body []byte) (*ResponsesRequest, error) {
	var v struct {
		Model              string          `json:"model"`
		Instructions       string          `json:"instructions"`
		PreviousResponseID string          `json:"previous_response_id"`
		Input              json.RawMessage `json:"input"`
		sessionFields
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	r := &ResponsesRequest{Model: v.Model, Instructions: v.Instructions, PreviousResponseID: v.PreviousResponseID, Raw: v.raw()}
	in := bytes.TrimSpace(v.Input)
	switch {
	case len(in) > 0 && in[0] == '"':
		var s string
		_ = json.Unmarshal(in, &s)
		r.Items = []Item{{Type: "message", Role: "user", Content: mustJSON(s)}}
	case len(in) > 0 && in[0] == '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(in, &raws); err != nil {
			return nil, fmt.Errorf("%w: input: %v", ErrBadBody, err)
		}
		r.Items = make([]Item, len(raws))
		for i, raw := range raws {
			it := &r.Items[i]
			if err := json.Unmarshal(raw, it); err != nil {
				return nil, fmt.Errorf("%w: input[%d]: %v", ErrBadBody, i, err)
			}
			if it.Type == "" && it.Role != "" {
				it.Type = "message"
			}
			if it.Type == "custom_tool_call" {
				it.Raw = raw
			}
			raws[i] = nil
		}
	}
	return r, nil
}
