package wire

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// ItemMessages is items as transcript messages, index for index (capture's
// conversion): function calls are assistant tool_use messages, their
// outputs user tool_result messages; items that are no conversation
// message (system, developer, reasoning, compaction) get role "system", so
// Conversation and the validator leave them out.
func ItemMessages(items []Item) []Msg {
	ms := itemsMessages(items)
	out := make([]Msg, len(ms))
	for i := range ms {
		out[i].Message = ms[i]
		if out[i].Role == "" {
			out[i].Role = RoleSystem
		}
	}
	return out
}

// LastCompactionItem is the index of the last compaction item of items
// and its opaque value (-1 when there is none).
func LastCompactionItem(items []Item) (int, string) {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type == TypeCompaction {
			return i, items[i].EncryptedContent
		}
	}
	return -1, ""
}

// PeekSummary is the summary text a Recall marker carries, read without
// verifying it (a forged one's text is only content its sender wrote).
func PeekSummary(opaque string) (string, bool) {
	body, ok := strings.CutPrefix(opaque, MarkerPrefix)
	p64, _, _ := strings.Cut(body, ".")
	payload, err := base64.RawURLEncoding.DecodeString(p64)
	var m Marker
	if !ok || err != nil || json.Unmarshal(payload, &m) != nil || strings.TrimSpace(m.Summary) == "" {
		return "", false
	}
	return m.Summary, true
}

// UserTextItem is a Responses user message item holding text.
func UserTextItem(text string) Item {
	raw, _ := json.Marshal(map[string]string{"type": "message", "role": events.RoleUser, "content": text})
	c, _ := json.Marshal(text)
	return Item{Type: "message", Role: events.RoleUser, Content: c, Raw: raw}
}

// EncodeItems sets the request's input to items, as sent.
func (r *ResponsesRequest) EncodeItems(items []Item) ([]byte, error) {
	raws := make([]json.RawMessage, len(items))
	for i := range items {
		raws[i] = items[i].Raw
	}
	in, err := json.Marshal(raws)
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(r.Raw))
	for k, v := range r.Raw {
		out[k] = v
	}
	out["input"] = in
	r.Items = items
	return json.Marshal(out)
}
