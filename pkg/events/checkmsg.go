package events

import (
	"bytes"
	"strings"
)

// checkMessage reports whether data is certainly the data of a valid
// message: one decodeStrict and Message.Validate accept. It decodes
// nothing and allocates nothing, in one pass over the bytes, so checking a
// message costs what its size costs. false means "not certain", never
// "invalid": the caller then takes the full path, which accepts or words
// the error. To stay certain it refuses more than the full path does:
// field names of another case, a field given twice, null where a value
// goes, an escaped uuid, role, query source or block type. data must be
// plain as checkData establishes (valid UTF-8, no control bytes).
func checkMessage(data []byte) bool {
	s := scanner{b: data}
	if !s.message() {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

// messageFields are Message's JSON names, in the order of their bits in
// scanner.message's seen mask.
var messageFields = []string{"uuid", "parent_uuid", "role", "content", "message_id", "stop_reason", "model", "usage", "query_source", "agent_id", "peer_id"}

// blockFields are Block's JSON names, in the order of their bits.
var blockFields = []string{"type", "text", "thinking", "signature", "data", "id", "name", "input", "tool_use_id", "content", "is_error", "source"}

var usageFields = []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}

// scanner walks JSON bytes; every method reports whether what it read is
// certainly valid, and stops at the first doubt.
type scanner struct {
	b      []byte
	i      int
	blocks int // content blocks seen, tool_result content included
}

func (s *scanner) message() bool {
	var seen uint32
	var uuidOK, roleOK, contentOK bool
	ok := s.object(func(key []byte) bool {
		f := fieldIndex(messageFields, key)
		if f < 0 || seen&(1<<f) != 0 {
			return false // an unknown field (an error) or a doubt
		}
		seen |= 1 << f
		switch messageFields[f] {
		case "uuid":
			v, plain, ok := s.str()
			uuidOK = ok && plain && len(v) > 0 && len(v) <= 256 && bytes.IndexByte(v, 0x7f) < 0
			return uuidOK
		case "role":
			v, plain, ok := s.str()
			roleOK = ok && plain && (string(v) == RoleUser || string(v) == RoleAssistant)
			return roleOK
		case "query_source":
			v, plain, ok := s.str()
			return ok && plain && (len(v) == 0 || string(v) == QueryMain || string(v) == QuerySubagent)
		case "content":
			contentOK = s.content(0, true)
			return contentOK
		case "usage":
			return s.usage()
		default:
			_, _, ok := s.str()
			return ok
		}
	})
	return ok && uuidOK && roleOK && contentOK
}

// content reads a block list or a string (one text block); nonEmpty asks
// for at least one block. depth is how deep in tool_result content it is.
func (s *scanner) content(depth int, nonEmpty bool) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '"' {
		// One text block, counted as decoding makes it.
		s.blocks++
		_, _, ok := s.str()
		return ok && s.blocks <= MaxBlocks
	}
	n := 0
	ok := s.array(func() bool {
		n++
		s.blocks++
		return s.blocks <= MaxBlocks && s.block(depth)
	})
	return ok && (n > 0 || !nonEmpty)
}

func (s *scanner) block(depth int) bool {
	var seen uint32
	var typ []byte
	var hasID, hasName, hasToolUseID bool
	ok := s.object(func(key []byte) bool {
		f := fieldIndex(blockFields, key)
		if f < 0 {
			// Decoding ignores unknown block fields, unless they are
			// a known one in another case.
			return !foldsToAny(blockFields, key) && s.skip()
		}
		if seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		switch blockFields[f] {
		case "input", "source":
			return s.skip()
		case "content":
			return s.content(depth+1, false)
		case "is_error":
			return s.literal("true") || s.literal("false")
		}
		v, plain, ok := s.str()
		switch blockFields[f] {
		case "type":
			typ = v
			return ok && plain
		case "id":
			hasID = len(v) > 0
		case "name":
			hasName = len(v) > 0
		case "tool_use_id":
			hasToolUseID = len(v) > 0
		}
		return ok
	})
	if !ok {
		return false
	}
	switch string(typ) {
	case BlockText, BlockThinking, BlockRedactedThinking, BlockImage, BlockDocument:
		return true
	case BlockToolUse:
		return hasID && hasName
	case BlockToolResult:
		return hasToolUseID && depth < 2
	}
	return false
}

func (s *scanner) usage() bool {
	var seen uint32
	return s.object(func(key []byte) bool {
		f := fieldIndex(usageFields, key)
		if f < 0 || seen&(1<<f) != 0 {
			return false
		}
		seen |= 1 << f
		return s.count()
	})
}

// count reads a non-negative integer that fits an int64 (at most 18
// digits, no sign, fraction or exponent).
func (s *scanner) count() bool {
	s.ws()
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n := s.i - start
	return n > 0 && n <= 18 && (n == 1 || s.b[start] != '0') && s.endOfNumber()
}

func (s *scanner) endOfNumber() bool {
	return s.i == len(s.b) || !strings.ContainsRune("0123456789.eE+-", rune(s.b[s.i]))
}

// object reads an object, calling member for each key with the scanner at
// its value.
func (s *scanner) object(member func(key []byte) bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.ws()
		key, plain, ok := s.str()
		if !ok || !plain {
			return false
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		if !member(key) {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem for each element.
func (s *scanner) array(elem func() bool) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return false
	}
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str reads a string and returns its raw bytes between the quotes;
// plain says it holds no escape (so the raw bytes are its value).
func (s *scanner) str() (raw []byte, plain, ok bool) {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false, false
	}
	start := s.i + 1
	plain = true
	for s.i = start; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '"':
			s.i++
			return s.b[start : s.i-1], plain, true
		case '\\':
			plain = false
			if !s.escape() {
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

// escape checks the escape sequence at s.i (the backslash) and leaves s.i
// on its last byte.
func (s *scanner) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	s.i++
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		if s.i+4 >= len(s.b) {
			return false
		}
		for _, c := range s.b[s.i+1 : s.i+5] {
			if !isHex(c) {
				return false
			}
		}
		s.i += 4
		return true
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skip reads any JSON value other than null.
func (s *scanner) skip() bool {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == '{':
		return s.object(func([]byte) bool { return s.skipOrNull() })
	case c == '[':
		return s.array(s.skipOrNull)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

// skipOrNull is skip that also takes null (inside a value kept raw).
func (s *scanner) skipOrNull() bool { return s.literal("null") || s.skip() }

func (s *scanner) literal(lit string) bool {
	s.ws()
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// number reads a JSON number as the grammar has it.
func (s *scanner) number() bool {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	start := s.i
	if n := s.digits(); n == 0 || n > 1 && s.b[start] == '0' {
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return false
		}
	}
	return s.endOfNumber()
}

// digits reads a run of digits and returns its length.
func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// fieldIndex is the index of key in fields (exact case), or -1.
func fieldIndex(fields []string, key []byte) int {
	for i, f := range fields {
		if string(key) == f {
			return i
		}
	}
	return -1
}

// foldsToAny reports whether key equals one of fields under Unicode case
// folding, as decoding matches field names.
func foldsToAny(fields []string, key []byte) bool {
	for _, f := range fields {
		if strings.EqualFold(string(key), f) {
			return true
		}
	}
	return false
}
