// Package wire holds the parts of the providers' wire formats the gateway
// reads and writes — Anthropic Messages, OpenAI Chat Completions and
// Responses — and their conversion to Recall's transcript messages
// (events.Message, Anthropic-shaped). Decoding keeps every field it does not
// know as raw JSON, so a body re-encoded after an edit loses nothing the
// client sent. It is pure: no I/O, no NATS.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// RoleSystem is the role of the system turns Claude Code (2.1.3xx, the
// per-turn-control beta) sends inside messages: not part of the
// conversation's user/assistant structure.
const RoleSystem = "system"

// ErrBadBody wraps every error of a body that is not the API's shape.
var ErrBadBody = errors.New("invalid request body")

// MessagesRequest is an Anthropic Messages request: the fields the gateway
// reads, and Raw, every top-level field as sent.
type MessagesRequest struct {
	Model             string                     `json:"model"`
	Stream            bool                       `json:"stream"`
	MaxTokens         int64                      `json:"max_tokens"`
	System            json.RawMessage            `json:"system,omitempty"`
	Messages          []Msg                      `json:"messages"`
	Metadata          *Metadata                  `json:"metadata,omitempty"`
	ContextManagement json.RawMessage            `json:"context_management,omitempty"`
	Compaction        json.RawMessage            `json:"compaction,omitempty"`
	Raw               map[string]json.RawMessage `json:"-"`
}

// Metadata is the request's metadata; Claude Code's user_id is a JSON
// string holding its session_id.
type Metadata struct {
	UserID string `json:"user_id,omitempty"`
}

// DecodeMessages decodes an Anthropic Messages request body. Raw holds
// every top-level field but messages (each message's Raw holds it as
// sent). The raw values are copies: body may be reused.
func DecodeMessages(body []byte) (*MessagesRequest, error) {
	r, ok := decodeMessagesFast(body)
	if !ok {
		var err error
		if r, err = decodeMessagesStd(body); err != nil {
			return nil, err
		}
	}
	if err := checkRoles(r); err != nil {
		return nil, err
	}
	return r, nil
}

// checkRoles refuses a message whose role is not user, assistant or system.
func checkRoles(r *MessagesRequest) error {
	for i := range r.Messages {
		if m := &r.Messages[i].Message; m.Role != events.RoleUser && m.Role != events.RoleAssistant && m.Role != RoleSystem {
			return fmt.Errorf("%w: messages[%d].role must be user, assistant or system, not %q", ErrBadBody, i, m.Role)
		}
	}
	return nil
}

// decodeMessagesStd is DecodeMessages by encoding/json: the judge of a
// body the fast decoder does not take, and the wording of its errors.
func decodeMessagesStd(body []byte) (*MessagesRequest, error) {
	r := &MessagesRequest{}
	if err := json.Unmarshal(body, &r.Raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	if err := json.Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadBody, err)
	}
	delete(r.Raw, "messages")
	return r, nil
}

// Encode re-encodes the request: Raw with messages (and the fields the
// gateway changes) replaced.
func (r *MessagesRequest) Encode() ([]byte, error) {
	out := make(map[string]json.RawMessage, len(r.Raw)+1)
	for k, v := range r.Raw {
		out[k] = v
	}
	b, err := json.Marshal(r.Messages)
	if err != nil {
		return nil, fmt.Errorf("encoding messages: %w", err)
	}
	out["messages"] = b
	setRaw(out, "context_management", r.ContextManagement)
	setRaw(out, "compaction", r.Compaction)
	return json.Marshal(out)
}

func setRaw(m map[string]json.RawMessage, k string, v json.RawMessage) {
	if len(v) == 0 {
		delete(m, k)
		return
	}
	m[k] = v
}

// Msg is one message of a request: decoded, and as sent (Raw). Encoding
// writes Raw when set — so fields Recall does not model, such as
// cache_control, survive — and the decoded message otherwise: an edit sets
// Raw to nil.
type Msg struct {
	events.Message
	Raw json.RawMessage
}

// UnmarshalJSON keeps the raw message beside the decoded one.
func (m *Msg) UnmarshalJSON(b []byte) error {
	m.Raw = append(json.RawMessage(nil), b...)
	return json.Unmarshal(b, &m.Message)
}

// MarshalJSON writes Raw, or the role and content of the decoded message.
func (m Msg) MarshalJSON() ([]byte, error) {
	if m.Raw != nil {
		return m.Raw, nil
	}
	return json.Marshal(struct {
		Role    string         `json:"role"`
		Content events.Content `json:"content"`
	}{m.Role, m.Content})
}

// SessionFromUserID returns the session_id of Claude Code's
// metadata.user_id (a JSON object in a string), or "".
func SessionFromUserID(userID string) string {
	if !strings.HasPrefix(strings.TrimSpace(userID), "{") {
		return ""
	}
	var v struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal([]byte(userID), &v) != nil {
		return ""
	}
	return v.SessionID
}

// Response is an Anthropic Messages response (non-streaming), also what a
// stream accumulates to.
type Response struct {
	ID         string         `json:"id"`
	Type       string         `json:"type"`
	Role       string         `json:"role"`
	Model      string         `json:"model"`
	Content    events.Content `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      events.Usage   `json:"usage"`
}

// LastUserText is the text of the last message but trailing system turns
// when it is a user message (its text blocks joined by newlines), or "".
func LastUserText(msgs []Msg) string {
	for len(msgs) > 0 && msgs[len(msgs)-1].Role == RoleSystem {
		msgs = msgs[:len(msgs)-1] // a system turn may follow the user's
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != events.RoleUser {
		return ""
	}
	return Text(msgs[len(msgs)-1].Content)
}

// Conversation returns the user and assistant messages of msgs, without
// the system turns, as the transcript and the validator take them.
func Conversation(msgs []Msg) []*events.Message {
	out := make([]*events.Message, 0, len(msgs))
	for i := range msgs {
		if msgs[i].Role != RoleSystem {
			out = append(out, &msgs[i].Message)
		}
	}
	return out
}

// Text joins the text blocks of c with newlines.
func Text(c events.Content) string {
	var b strings.Builder
	for i := range c {
		if c[i].Type == events.BlockText {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(c[i].Text)
		}
	}
	return b.String()
}

// ErrorBody is the Anthropic error shape.
func ErrorBody(typ, message string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
	return b
}
