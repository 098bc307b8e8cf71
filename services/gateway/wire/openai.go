package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ChatRequest is an OpenAI Chat Completions request: the fields the
// gateway reads, and Raw, every top-level field as sent.
type ChatRequest struct {
	Model    string                     `json:"model"`
	Stream   bool                       `json:"stream"`
	Messages []ChatMessage              `json:"messages"`
	User     string                     `json:"user,omitempty"`
	Raw      map[string]json.RawMessage `json:"-"`
}

// ChatMessage is one Chat Completions message.
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  []ChatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
}

// ChatToolCall is a function call of an assistant message.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// DecodeChat decodes a Chat Completions request body.
func DecodeChat(body []byte) (*ChatRequest, error) {
	r := &ChatRequest{}
	if err := json.Unmarshal(body, &r.Raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	return r, nil
}

// ContentText is the text of a Chat content (a string, or an array of
// parts whose text parts are joined by newlines).
func ContentText(c json.RawMessage) string {
	c = bytes.TrimSpace(c)
	if len(c) == 0 || bytes.Equal(c, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &parts)
	var b bytes.Buffer
	for _, p := range parts {
		if p.Text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ResponsesRequest is an OpenAI Responses request: the fields the gateway
// reads, and Raw, every top-level field as sent. Input is a string or a
// list of items (Items, decoded when it is a list).
type ResponsesRequest struct {
	Model              string                     `json:"model"`
	Stream             bool                       `json:"stream"`
	Input              json.RawMessage            `json:"input,omitempty"`
	Instructions       string                     `json:"instructions,omitempty"`
	PreviousResponseID string                     `json:"previous_response_id,omitempty"`
	ContextManagement  json.RawMessage            `json:"context_management,omitempty"`
	Items              []Item                     `json:"-"`
	Raw                map[string]json.RawMessage `json:"-"`
}

// Item is one Responses input or output item; Raw is the item as sent.
type Item struct {
	Type             string          `json:"type,omitempty"`
	ID               string          `json:"id,omitempty"`
	Role             string          `json:"role,omitempty"`
	Content          json.RawMessage `json:"content,omitempty"`
	CallID           string          `json:"call_id,omitempty"`
	Name             string          `json:"name,omitempty"`
	Arguments        string          `json:"arguments,omitempty"`
	Output           json.RawMessage `json:"output,omitempty"`
	EncryptedContent string          `json:"encrypted_content,omitempty"`
	Raw              json.RawMessage `json:"-"`
}

// DecodeResponses decodes a Responses request body.
func DecodeResponses(body []byte) (*ResponsesRequest, error) {
	r := &ResponsesRequest{}
	if err := json.Unmarshal(body, &r.Raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	in := bytes.TrimSpace(r.Input)
	if len(in) > 0 && in[0] == '"' {
		var s string
		_ = json.Unmarshal(in, &s)
		r.Items = []Item{{Type: "message", Role: "user", Content: mustJSON(s)}}
		return r, nil
	}
	if len(in) > 0 && in[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(in, &raws); err != nil {
			return nil, fmt.Errorf("%w: input: %v", ErrBadBody, err)
		}
		r.Items = make([]Item, len(raws))
		for i, raw := range raws {
			if err := json.Unmarshal(raw, &r.Items[i]); err != nil {
				return nil, fmt.Errorf("%w: input[%d]: %v", ErrBadBody, i, err)
			}
			if r.Items[i].Type == "" && r.Items[i].Role != "" {
				r.Items[i].Type = "message"
			}
			r.Items[i].Raw = raw
		}
	}
	return r, nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// OpenAIErrorBody is the OpenAI error shape.
func OpenAIErrorBody(typ, code, message string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "code": code, "param": nil}})
	return b
}
