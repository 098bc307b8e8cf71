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

// compactJSONLen is the length JSON.stringify gives the value raw holds,
// in UTF-16 units: insignificant whitespace is dropped and every escape is
// counted as JavaScript writes it, not as raw spells it. "\u003c" is one
// character ('<'); '"', '\\' and \b \f \n \r \t stay two-character escapes;
// other control characters and lone surrogates take six (\uXXXX).
func compactJSONLen(raw []byte) int {
	n, inString := 0, false
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(raw[i:])
			n += utf16Units(r)
			i += size
		case inString && c == '\\':
			units, size := jsEscapeLen(raw[i:])
			n += units
			i += size
		case c == '"':
			inString = !inString
			n++
			i++
		case !inString && (c == ' ' || c == '\n' || c == '\t' || c == '\r'):
			i++
		default:
			n++
			i++
		}
	}
	return n
}

// jsEscapeLen decodes the JSON escape at the start of b and returns how many
// UTF-16 units JSON.stringify writes for the character, and the escape's
// length in b.
func jsEscapeLen(b []byte) (units, size int) {
	if len(b) < 2 {
		return 1, len(b)
	}
	if b[1] != 'u' {
		if b[1] == '/' {
			return 1, 2 // "\/" is "/", which JavaScript does not escape
		}
		return 2, 2
	}
	r, ok := hex4(b[2:])
	if !ok {
		return 2, 2
	}
	switch {
	case r >= 0xD800 && r <= 0xDBFF:
		if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hex4(b[8:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return 2, 12 // a surrogate pair: one astral character
			}
		}
		return 6, 6 // a lone surrogate stays escaped
	case r >= 0xDC00 && r <= 0xDFFF:
		return 6, 6
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2, 6
	case r < 0x20:
		return 6, 6
	}
	return 1, 6
}

// hex4 parses four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// utf16Units is the number of UTF-16 units of r.
func utf16Units(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// Padded is the reference's estimateMessageTokens padding of a rough
// estimate: ceil(n × 4/3). The keep window and the post-compaction
// threshold check compare padded estimates, as the reference does.
func Padded(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return (n*4 + 2) / 3
}

// SyntheticModel is the model name Claude Code gives assistant records it
// wrote itself (an API error, an interruption notice): their usage is not
// the context's.
const SyntheticModel = "<synthetic>"

// RealUsage reports whether m carries usage that measures the context: an
// assistant record with non-zero usage from a real model. Only such a record
// may anchor the token count.
func RealUsage(m *events.Message) bool {
	return m.Role == events.RoleAssistant && m.Usage != nil && m.Usage.Total() > 0 && m.Model != SyntheticModel
}
