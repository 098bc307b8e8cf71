package memory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
)

// DefaultMaxBlockTokens is the largest block (estimated tokens) an
// extraction shows the model whole: a 20,000-token file or log is read as
// is, a larger one by its beginning and end.
const DefaultMaxBlockTokens = 20000

// ClipMarker is the text that replaces the middle of a clipped string; its
// argument is the number of bytes left out.
const ClipMarker = "\n[… %d bytes omitted by Recall: the block was too long to summarize whole …]\n"

// ClipContent returns c with every text block, every text inside a
// tool_result and every string inside a tool_use input whose own estimate
// exceeds maxTokens cut to its first and last maxTokens*2 bytes around
// ClipMarker, so one huge file, log or paste cannot make a summarizer's
// input too long for its model — and a session's memory stuck on it. Cuts
// fall on UTF-8 boundaries; a tool_use input stays a valid JSON value.
// Blocks within the limit are returned unchanged, and c itself when nothing
// is cut (clipped false). maxTokens <= 0 clips nothing.
func ClipContent(c events.Content, maxTokens int) (out events.Content, clipped bool) {
	if maxTokens <= 0 {
		return c, false
	}
	for i := range c {
		b, ok := clipBlock(c[i], maxTokens)
		if !ok {
			continue
		}
		if !clipped {
			out, clipped = append(events.Content(nil), c...), true
		}
		out[i] = b
	}
	if !clipped {
		return c, false
	}
	return out, true
}

// clipBlock clips one block; ok reports a change.
func clipBlock(b events.Block, maxTokens int) (events.Block, bool) {
	if stringBytes(&b) <= 4*maxTokens || EstimateBlock(&b) <= int64(maxTokens) {
		return b, false // the first test, on byte lengths alone, spares the scan of every block read
	}
	switch b.Type {
	case events.BlockText:
		var ok bool
		b.Text, ok = clipString(b.Text, maxTokens)
		return b, ok
	case events.BlockToolResult:
		inner, ok := ClipContent(b.Content, maxTokens)
		b.Content = inner
		return b, ok
	case events.BlockToolUse:
		in, ok := clipJSON(b.Input, maxTokens)
		b.Input = in
		return b, ok
	}
	return b, false
}

// ClipText is s cut to its first and last maxTokens*2 bytes around
// ClipMarker when its estimate exceeds maxTokens (clipped reports a cut).
func ClipText(s string, maxTokens int) (out string, clipped bool) {
	if maxTokens <= 0 {
		return s, false
	}
	return clipString(s, maxTokens)
}

// clipString keeps the first and last maxTokens*2 bytes of s around the
// marker when its estimate exceeds maxTokens (ok reports a cut).
func clipString(s string, maxTokens int) (string, bool) {
	keep := 2 * maxTokens
	if EstimateText(s) <= int64(maxTokens) || 2*keep >= len(s) {
		return s, false
	}
	head := keep
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	tail := len(s) - keep
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return s[:head] + fmt.Sprintf(ClipMarker, tail-head) + s[tail:], true
}

// clipJSON clips the long strings inside a JSON value (a tool's input: a
// file written, a command's heredoc). Invalid JSON is left as is.
func clipJSON(raw json.RawMessage, maxTokens int) (json.RawMessage, bool) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw, false
	}
	v, ok := clipValue(v, maxTokens)
	if !ok {
		return raw, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return raw, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

func clipValue(v any, maxTokens int) (any, bool) {
	switch t := v.(type) {
	case string:
		return clipString(t, maxTokens)
	case []any:
		changed := false
		for i := range t {
			var ok bool
			if t[i], ok = clipValue(t[i], maxTokens); ok {
				changed = true
			}
		}
		return t, changed
	case map[string]any:
		changed := false
		for k, e := range t {
			if c, ok := clipValue(e, maxTokens); ok {
				t[k], changed = c, true
			}
		}
		return t, changed
	}
	return v, false
}

// stringBytes is the byte length of the strings of b that clipping looks
// at; a UTF-16 length is never larger, so no string of a block within
// 4*maxTokens bytes is over maxTokens.
func stringBytes(b *events.Block) int {
	n := len(b.Text) + len(b.Input)
	for i := range b.Content {
		n += stringBytes(&b.Content[i])
	}
	return n
}
