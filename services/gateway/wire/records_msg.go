package wire

import (
	"encoding/json"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Reply is a model response as capture keeps it: its id, model, stop
// reason, usage (Anthropic's shape) and the assistant messages it adds to
// the conversation, in the provider's own form (Anthropic: one message;
// Chat: one message; Responses: its output items).
type Reply struct {
	ID         string
	Model      string
	StopReason string
	Usage      events.Usage
	Anthropic  *Msg
	Chat       *ChatMessage
	Items      []Item
}

// History is a request's conversation as capture converts it into
// transcript messages with their record ids (see RecordIDs): Messages
// (Anthropic), Chat (Chat Completions), or Items with Previous (Responses,
// Responses set). System and
// developer turns and items that are no conversation message are left
// out, and so is a message left without content once the blocks the
// transcript does not take (server tools, citations: anything but text,
// thinking, tool_use, tool_result, image, document) are dropped. The last
// record of the reply carries its id (MessageID), model, stop reason and
// usage.
type History struct {
	Session  string
	Messages []Msg
	Chat     []ChatMessage
	Items    []Item
	Previous string
	// Responses marks a Responses request (Items may be empty).
	Responses bool
}

// Records returns the records of c followed by those of reply (nil: the
// request's messages only), in order.
func (c *History) Records(reply *Reply) []events.Message {
	var ids []string
	var conv []events.Message
	switch {
	case c.Responses:
		items := c.Items
		if reply != nil {
			items = append(items[:len(items):len(items)], reply.Items...)
		}
		ids = ResponsesRecordIDs(c.Session, c.Previous, items)
		conv = itemsMessages(items)
	case c.Chat != nil:
		msgs := c.Chat
		if reply != nil && reply.Chat != nil {
			msgs = append(msgs[:len(msgs):len(msgs)], *reply.Chat)
		}
		ids = ChatRecordIDs(c.Session, msgs)
		conv = chatMessages(msgs)
	default:
		msgs := c.Messages
		if reply != nil && reply.Anthropic != nil {
			msgs = append(msgs[:len(msgs):len(msgs)], *reply.Anthropic)
		}
		ids = RecordIDs(c.Session, msgs)
		conv = make([]events.Message, len(msgs))
		for i := range msgs {
			conv[i] = msgs[i].Message
		}
	}
	out := make([]events.Message, 0, len(conv))
	for i := range conv {
		if ids[i] == "" {
			continue
		}
		m := conv[i]
		m.Content = transcriptBlocks(m.Content)
		if len(m.Content) == 0 {
			continue
		}
		m.UUID = ids[i]
		out = append(out, m)
	}
	if reply != nil && len(out) > 0 && out[len(out)-1].Role == events.RoleAssistant {
		last := &out[len(out)-1]
		last.MessageID, last.Model, last.StopReason = reply.ID, reply.Model, reply.StopReason
		u := reply.Usage
		last.Usage = &u
	}
	return out
}

// transcriptBlocks keeps the blocks the transcript takes, without fields
// it does not model.
func transcriptBlocks(c events.Content) events.Content {
	out := make(events.Content, 0, len(c))
	for _, b := range c {
		switch b.Type {
		case events.BlockText, events.BlockThinking, events.BlockRedactedThinking, events.BlockImage, events.BlockDocument:
		case events.BlockToolUse:
			if len(b.Input) == 0 || !json.Valid(b.Input) {
				b.Input = json.RawMessage("{}")
			}
		case events.BlockToolResult:
			b.Content = transcriptBlocks(b.Content)
		default:
			continue
		}
		out = append(out, b)
	}
	return out
}

// chatMessages converts Chat messages to transcript messages (Anthropic
// shape): tool calls become tool_use blocks, a "tool" message a user
// message with one tool_result. System and developer messages become
// zero messages (their ids are "").
func chatMessages(msgs []ChatMessage) []events.Message {
	out := make([]events.Message, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case events.RoleUser:
			out[i] = events.Message{Role: events.RoleUser, Content: chatContent(m.Content)}
		case events.RoleAssistant:
			c := textContent(ContentText(m.Content))
			for _, tc := range m.ToolCalls {
				c = append(c, toolUse(tc.ID, tc.Function.Name, tc.Function.Arguments))
			}
			out[i] = events.Message{Role: events.RoleAssistant, Content: c}
		case "tool":
			out[i] = events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: m.ToolCallID, Content: textContent(ContentText(m.Content))}}}
		}
	}
	return out
}

// chatContent is a user message's text (image parts are not kept).
func chatContent(c json.RawMessage) events.Content { return textContent(ContentText(c)) }

func textContent(s string) events.Content {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	return events.Content{{Type: events.BlockText, Text: s}}
}

func toolUse(id, name, args string) events.Block {
	in := json.RawMessage(args)
	if !json.Valid(in) {
		in, _ = json.Marshal(map[string]string{"arguments": args})
	}
	return events.Block{Type: events.BlockToolUse, ID: id, Name: name, Input: in}
}

// itemsMessages converts Responses items: a message to a user or assistant
// message of its text, a function_call to an assistant tool_use, its
// output to a user tool_result; anything else to a zero message.
func itemsMessages(items []Item) []events.Message {
	out := make([]events.Message, len(items))
	for i := range items {
		it := &items[i]
		switch it.Type {
		case "message":
			if it.Role == events.RoleUser || it.Role == events.RoleAssistant {
				out[i] = events.Message{Role: it.Role, Content: textContent(ContentText(it.Content))}
			}
		case "function_call", "custom_tool_call":
			args := it.Arguments
			if args == "" && len(it.Raw) > 0 {
				var v struct {
					Input string `json:"input"`
				}
				_ = json.Unmarshal(it.Raw, &v)
				args = v.Input
			}
			out[i] = events.Message{Role: events.RoleAssistant, Content: events.Content{toolUse(it.CallID, it.Name, args)}}
		case "function_call_output", "custom_tool_call_output":
			out[i] = events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: it.CallID, Content: textContent(ContentText(it.Output))}}}
		}
	}
	return out
}
