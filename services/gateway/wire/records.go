package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// Record ids. Every request of a conversation resends its whole history,
// and clients restructure it between requests: Claude Code moves
// cache_control, sends a system turn as blocks once and as a string later,
// replaces a large tool output by a 2 KB preview, clears thinking and old
// tool results, re-sends its last tool exchange after compacting. Capture
// stores each message once because a message's record id is derived from
// what stays the same through all of that, never from its index alone:
//
//   - a message holding tool calls (an Anthropic assistant message with
//     tool_use blocks, a Chat assistant message with tool_calls, a
//     Responses function_call item) is keyed by its first call's id;
//   - a message holding tool results (a user message with tool_result
//     blocks, a Chat "tool" message, a function_call_output item) by the
//     call id its first result answers;
//   - a Responses output message item that carries its item id by that id;
//   - any other user or assistant message (text, images) by the SHA-256 of
//     its text (trimmed, blocks joined by newlines; thinking left out, since
//     clients clear it) and of its image and document sources, together
//     with the key of the conversation message before it and the number of
//     earlier messages of the request with the same role, content and
//     predecessor — so "continue" sent twice is two records, and a message
//     is the same record whether or not the history before its
//     predecessor was compacted away. With a Responses
//     previous_response_id, the predecessor of the first input item is
//     that response.
//
// The id is "gw" and 32 hex digits: the first 16 bytes of the SHA-256 of
// the session id and the key, so two sessions never share an id (the
// transcript's deduplication window is one per stream). System and
// developer turns, reasoning items and other items that are no
// conversation message get "" (they are not captured). The functions are
// pure and deterministic: the same session and history give the same ids
// in any process, before and after a gateway restart. A record id is the
// transcript record's uuid and its CloudEvents id.

// RecordIDs returns the record id of each message of an Anthropic Messages
// request of session, "" for role "system" turns. The id of the response to
// the request is RecordIDs(session, append(msgs, response))'s last.
func RecordIDs(session string, msgs []Msg) []string {
	k := newKeyer(session, "")
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = k.next(anthropicKey(&msgs[i].Message))
	}
	return out
}

// ChatRecordIDs is RecordIDs for an OpenAI Chat Completions request:
// "" for system and developer messages.
func ChatRecordIDs(session string, msgs []ChatMessage) []string {
	k := newKeyer(session, "")
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = k.next(chatKey(&msgs[i]))
	}
	return out
}

// ResponsesRecordIDs is RecordIDs for the input items of an OpenAI
// Responses request: "" for system and developer messages, reasoning and
// items that are no conversation message. previous is the request's
// previous_response_id ("" for none).
func ResponsesRecordIDs(session, previous string, items []Item) []string {
	anchor := ""
	if previous != "" {
		anchor = "response:" + previous
	}
	k := newKeyer(session, anchor)
	out := make([]string, len(items))
	for i := range items {
		out[i] = k.next(itemKey(&items[i]))
	}
	return out
}

// key is what identifies a message: strong (a call, a result or an item
// id: the same whatever comes before it) or a content digest (weak: placed
// by its predecessor). A zero key is no conversation message.
type key struct {
	role   string
	strong string
	digest string
}

func (k key) none() bool { return k.strong == "" && k.digest == "" }

// keyer derives the ids of one history in order.
type keyer struct {
	session string
	prev    string
	seen    map[string]int
}

func newKeyer(session, anchor string) *keyer {
	return &keyer{session: session, prev: anchor, seen: map[string]int{}}
}

// next returns the id of the message keyed k and makes it the predecessor.
func (kr *keyer) next(k key) string {
	if k.none() {
		return ""
	}
	var material, placed string
	if k.strong != "" {
		material, placed = k.strong, k.strong
	} else {
		slot := k.role + "\x00" + k.digest + "\x00" + kr.prev
		n := kr.seen[slot]
		kr.seen[slot] = n + 1
		material = "text\x00" + slot + "\x00" + strconv.Itoa(n)
		placed = k.role + ":" + k.digest
	}
	kr.prev = placed
	sum := sha256.Sum256([]byte(kr.session + "\x00" + material))
	return "gw" + hex.EncodeToString(sum[:16])
}

func anthropicKey(m *events.Message) key {
	if m.Role != events.RoleUser && m.Role != events.RoleAssistant {
		return key{}
	}
	for i := range m.Content {
		switch b := &m.Content[i]; {
		case b.Type == events.BlockToolUse && m.Role == events.RoleAssistant && b.ID != "":
			return key{role: m.Role, strong: "tool_use:" + b.ID}
		case b.Type == events.BlockToolResult && m.Role == events.RoleUser && b.ToolUseID != "":
			return key{role: m.Role, strong: "tool_result:" + b.ToolUseID}
		}
	}
	return key{role: m.Role, digest: contentDigest(m.Content)}
}

// contentDigest hashes the text and the media sources of c.
func contentDigest(c events.Content) string {
	h := sha256.New()
	h.Write([]byte(strings.TrimSpace(Text(c))))
	for i := range c {
		if len(c[i].Source) > 0 {
			h.Write([]byte{0})
			h.Write(c[i].Source)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

func textDigest(s string) string {
	sum := sha256.Sum256([]byte(strings.TrimSpace(s)))
	return hex.EncodeToString(sum[:12])
}

func chatKey(m *ChatMessage) key {
	switch m.Role {
	case events.RoleAssistant:
		if len(m.ToolCalls) > 0 && m.ToolCalls[0].ID != "" {
			return key{role: m.Role, strong: "tool_use:" + m.ToolCalls[0].ID}
		}
	case "tool":
		if m.ToolCallID != "" {
			return key{role: events.RoleUser, strong: "tool_result:" + m.ToolCallID}
		}
	case events.RoleUser:
	default:
		return key{}
	}
	return key{role: m.Role, digest: textDigest(ContentText(m.Content))}
}

func itemKey(it *Item) key {
	switch it.Type {
	case "function_call", "custom_tool_call":
		if it.CallID != "" {
			return key{role: events.RoleAssistant, strong: "tool_use:" + it.CallID}
		}
	case "function_call_output", "custom_tool_call_output":
		if it.CallID != "" {
			return key{role: events.RoleUser, strong: "tool_result:" + it.CallID}
		}
	case "message":
		switch it.Role {
		case events.RoleAssistant:
			if it.ID != "" {
				return key{role: it.Role, strong: "item:" + it.ID}
			}
			return key{role: it.Role, digest: textDigest(itemText(it.Content))}
		case events.RoleUser:
			return key{role: it.Role, digest: textDigest(itemText(it.Content))}
		}
	}
	return key{}
}

// itemText is the text of a Responses message's content: a string, or
// parts whose input_text / output_text / text are joined by newlines.
func itemText(c json.RawMessage) string { return ContentText(c) }
