package memory

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
)

// DecodeTriggerMessage reduces the JSON data of a transcript message stored
// at seq (stream time t) to a TriggerRecord without building the message: a
// single pass over the bytes that allocates only the uuid and message_id.
// For every input it returns what json.Unmarshal into events.Message
// followed by MessageRecord returns (shapes it does not handle itself, such
// as escaped or case-variant keys, take exactly that path), and that path's
// error when the data is not a valid message.
func DecodeTriggerMessage(seq uint64, t int64, data []byte) (TriggerRecord, error) {
	s := jscan{b: data}
	if r, ok := s.message(); ok {
		r.Seq, r.Time, r.Kind = seq, t, RecMessage
		return r, nil
	}
	var m events.Message
	if err := json.Unmarshal(data, &m); err != nil {
		return TriggerRecord{}, err
	}
	return MessageRecord(seq, t, &m), nil
}

// jscan is a minimal JSON reader; bad is set at the first byte it does not
// handle, and the caller falls back to encoding/json.
type jscan struct {
	b   []byte
	i   int
	bad bool
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\n', '\t', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jscan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	s.bad = true
	return 0
}

// str reads a string and returns its raw contents and whether they contain
// escapes.
func (s *jscan) str() (raw []byte, esc bool) {
	if s.peek() != '"' {
		s.bad = true
		return nil, false
	}
	s.i++
	start := s.i
	high := false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '\\':
			esc = true
			if !s.escape() {
				s.bad = true
				return nil, false
			}
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			if high && !utf8.Valid(raw) {
				s.bad = true // encoding/json replaces invalid bytes
				return nil, false
			}
			return raw, esc
		case c < 0x20:
			s.bad = true
			return nil, false
		default:
			high = high || c >= utf8.RuneSelf
			s.i++
		}
	}
	s.bad = true
	return nil, false
}

// escape validates the escape sequence at the cursor and steps over it.
func (s *jscan) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return true
	case 'u':
		if s.i+6 > len(s.b) {
			return false
		}
		for _, h := range s.b[s.i+2 : s.i+6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return false
			}
		}
		s.i += 6
		return true
	}
	return false
}

// null consumes a null literal if one is next.
func (s *jscan) null() bool {
	if s.peek() == 'n' && s.i+4 <= len(s.b) && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// strOrNull reads a string or null (an empty string, as encoding/json
// leaves it).
func (s *jscan) strOrNull() (raw []byte, esc bool) {
	if s.null() {
		return nil, false
	}
	return s.str()
}

// value skips a value and returns its raw bytes.
func (s *jscan) value() []byte {
	s.ws()
	start := s.i
	switch c := s.peek(); {
	case c == '"':
		s.str()
	case c == '{' || c == '[':
		depth := 0
		for s.i < len(s.b) && !s.bad {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i]
			}
		}
		s.bad = true
	default:
		for s.i < len(s.b) {
			c := s.b[s.i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\t' || c == '\r' {
				break
			}
			s.i++
		}
		if s.i == start {
			s.bad = true
		}
	}
	return s.b[start:s.i]
}

// object calls field for each key of an object (the cursor is on the value
// when field runs; field must consume it). Keys with escapes or non-ASCII
// bytes stop the scan.
func (s *jscan) object(field func(key []byte)) {
	if s.peek() != '{' {
		s.bad = true
		return
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return
	}
	for !s.bad {
		key, esc := s.str()
		if esc {
			s.bad = true
		}
		for _, c := range key {
			if c >= utf8.RuneSelf {
				s.bad = true
			}
		}
		if s.bad || s.peek() != ':' {
			s.bad = true
			return
		}
		s.i++
		field(key)
		if s.bad {
			return
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return
		default:
			s.bad = true
		}
	}
}

// match returns the index of key in names, or -1; a key equal to a name
// only up to case (encoding/json would match it) marks the scan bad.
func (s *jscan) match(key []byte, names []string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	for _, n := range names {
		if len(n) == len(key) && equalFoldASCII(key, n) {
			s.bad = true
		}
	}
	return -1
}

func equalFoldASCII(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

var messageKeys = []string{"uuid", "role", "content", "message_id", "stop_reason", "usage", "query_source",
	"parent_uuid", "model", "agent_id", "peer_id"}

func (s *jscan) message() (r TriggerRecord, ok bool) {
	var seen uint32
	source, synthetic := "", false
	s.object(func(key []byte) {
		k := s.match(key, messageKeys)
		if k >= 0 {
			if seen&(1<<k) != 0 {
				s.bad = true // duplicate key: leave it to encoding/json
				return
			}
			seen |= 1 << k
		}
		switch k {
		case 0, 1, 3, 6, 8: // uuid, role, message_id, query_source, model
			raw, esc := s.strOrNull()
			if esc {
				s.bad = true
				return
			}
			switch k {
			case 8:
				synthetic = string(raw) == SyntheticModel
			case 0:
				r.UUID = string(raw)
			case 1:
				r.Assistant = string(raw) == events.RoleAssistant
			case 3:
				r.MessageID = string(raw)
			case 6:
				source = string(raw)
			}
		case 2: // content
			r.Estimate, r.ToolUses = s.content(true)
		case 4: // stop_reason
			raw, _ := s.strOrNull()
			r.StopReason = len(raw) > 0
		case 5: // usage
			if s.null() {
				return
			}
			r.HasUsage, r.UsageTotal = true, s.usage()
		default:
			s.value()
		}
	})
	if s.bad {
		return TriggerRecord{}, false
	}
	if s.ws(); s.i != len(s.b) {
		return TriggerRecord{}, false
	}
	r.Main = source == "" || source == events.QueryMain
	if !r.Assistant || r.UsageTotal <= 0 || synthetic {
		r.HasUsage, r.UsageTotal = false, 0 // not real usage (RealUsage)
	}
	return r, true
}

var usageKeys = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}

func (s *jscan) usage() int64 {
	var total int64
	var seen uint32
	s.object(func(key []byte) {
		k := s.match(key, usageKeys)
		if k < 0 {
			s.value()
			return
		}
		if seen&(1<<k) != 0 {
			s.bad = true
			return
		}
		seen |= 1 << k
		if s.null() {
			return
		}
		v := s.value()
		n, ok := parseInt(v)
		if !ok {
			s.bad = true
		}
		total += n
	})
	return total
}

func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// content estimates a content value (string, null or array of blocks) and
// counts its tool_use blocks.
func (s *jscan) content(top bool) (est int64, tools int) {
	switch s.peek() {
	case '"':
		raw, esc := s.str()
		return charsToTokens(rawUTF16Len(raw, esc)), 0
	case 'n':
		if !s.null() {
			s.bad = true
		}
		return 0, 0
	case '[':
	default:
		s.bad = true
		return 0, 0
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return 0, 0
	}
	for !s.bad {
		e, tu := s.block()
		est += e
		if tu {
			tools++
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return est, tools
		default:
			s.bad = true
		}
	}
	return 0, 0
}

var blockKeys = []string{"type", "text", "thinking", "data", "name", "input", "content",
	"signature", "id", "tool_use_id", "is_error", "source"}

// block estimates one content block as EstimateBlock does.
func (s *jscan) block() (est int64, toolUse bool) {
	var seen uint32
	var typ []byte
	var text, thinking, data, name, inputLen int
	var nested int64
	s.object(func(key []byte) {
		k := s.match(key, blockKeys)
		if k >= 0 {
			if seen&(1<<k) != 0 {
				s.bad = true
				return
			}
			seen |= 1 << k
		}
		switch k {
		case 0:
			raw, esc := s.strOrNull()
			if esc {
				s.bad = true
			}
			typ = raw
		case 1, 2, 3, 4:
			raw, esc := s.strOrNull()
			n := rawUTF16Len(raw, esc)
			switch k {
			case 1:
				text = n
			case 2:
				thinking = n
			case 3:
				data = n
			case 4:
				name = n
			}
		case 5:
			inputLen = compactJSONLen(s.value())
		case 6:
			nested, _ = s.content(false)
		default:
			s.value()
		}
	})
	if s.bad {
		return 0, false
	}
	switch string(typ) {
	case events.BlockText:
		return charsToTokens(text), false
	case events.BlockThinking:
		return charsToTokens(thinking), false
	case events.BlockRedactedThinking:
		return charsToTokens(data), false
	case events.BlockToolUse:
		return charsToTokens(name + inputLen), true
	case events.BlockToolResult:
		return nested, false
	case events.BlockImage, events.BlockDocument:
		return ImageTokens, false
	}
	return charsToTokens(text + name + inputLen + len(typ)), false
}

// rawUTF16Len is the UTF-16 length of the JSON string whose raw contents
// (between the quotes) are raw, as encoding/json would decode it.
func rawUTF16Len(raw []byte, esc bool) int {
	n := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case esc && c == '\\':
			if i+1 < len(raw) && raw[i+1] == 'u' {
				i += 6 // each \uXXXX is one UTF-16 unit (a surrogate pair is two escapes)
			} else {
				i += 2
			}
			n++
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r >= 0x10000 {
				n += 2
			} else {
				n++
			}
			i += size
		}
	}
	return n
}
