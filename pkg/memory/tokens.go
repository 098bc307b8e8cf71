package memory

import (
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
)

// ImageTokens is the flat estimate of an image or document block.
const ImageTokens = 2000

// EstimateBlock is the reference's rough token estimate of one block:
// characters/4, rounded, where characters are UTF-16 code units as in
// JavaScript. text and thinking count their text; redacted_thinking its data;
// tool_use its name plus its JSON input (compact); tool_result its content,
// block by block; images and documents ImageTokens.
func EstimateBlock(b *events.Block) int64 {
	switch b.Type {
	case events.BlockText:
		return charsToTokens(utf16Len(b.Text))
	case events.BlockThinking:
		return charsToTokens(utf16Len(b.Thinking))
	case events.BlockRedactedThinking:
		return charsToTokens(utf16Len(b.Data))
	case events.BlockToolUse:
		return charsToTokens(utf16Len(b.Name) + compactJSONLen(b.Input))
	case events.BlockToolResult:
		return EstimateContent(b.Content)
	case events.BlockImage, events.BlockDocument:
		return ImageTokens
	default:
		// Unknown blocks count their visible fields, as JSON would.
		return charsToTokens(utf16Len(b.Text) + utf16Len(b.Name) + compactJSONLen(b.Input) + len(b.Type))
	}
}

// EstimateContent sums EstimateBlock over blocks.
func EstimateContent(c events.Content) int64 {
	var n int64
	for i := range c {
		n += EstimateBlock(&c[i])
	}
	return n
}

// EstimateMessage is the rough token estimate of a message's content. String
// content counts like a text block (the reference skips it in one place; we
// do not).
func EstimateMessage(m *events.Message) int64 { return EstimateContent(m.Content) }

// EstimateText estimates a plain string (characters/4, rounded).
func EstimateText(s string) int64 { return charsToTokens(utf16Len(s)) }

// charsToTokens is Math.round(n/4).
func charsToTokens(n int) int64 { return int64((n + 2) / 4) }

// utf16Len is the length of s in UTF-16 code units (JavaScript's length).
func utf16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
		i += size
	}
	return n
}

// compactJSONLen is the UTF-16 length JSON.stringify would give raw: the raw
// JSON without insignificant whitespace.
func compactJSONLen(raw []byte) int {
	n, inString, escaped := 0, false, false
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(raw[i:])
			if r >= 0x10000 {
				n += 2
			} else {
				n++
			}
			i += size
			continue
		}
		i++
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\n' || c == '\t' || c == '\r'):
			continue
		}
		n++
	}
	return n
}
