package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
)

// Limits applied by Validate. Ingest applies byte-size limits on top.
const (
	// MaxBlocks bounds the content blocks of one message (tool_result content
	// included).
	MaxBlocks = 1024
	// MaxDepth bounds the JSON nesting depth of an event's data.
	MaxDepth = 64
)

// ErrInvalidEvent is wrapped by every *FieldError.
var ErrInvalidEvent = errors.New("invalid event")

// FieldError names the attribute or data field that made an event invalid.
// Field uses CloudEvents attribute names ("id", "subject") or a JSON path into
// the data ("data.content[2].tool_use_id").
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes errors.Is(err, ErrInvalidEvent) true.
func (e *FieldError) Unwrap() error { return ErrInvalidEvent }

// ErrTenantMismatch is returned when an event claims a tenant other than the
// authenticated one.
var ErrTenantMismatch = errors.New("event tenant does not match the authenticated tenant")

// Session is a validated session event as ingest accepts it.
type Session struct {
	Tenant  string
	Session string
	Event   event.Event
	// Exactly one of these is set, according to Event.Type().
	Message    *Message
	Compacting *SessionCompacting
	Compacted  *SessionCompacted
	Ended      *SessionEnded
	Started    *SessionStarted
}

// ValidateIngest checks an event a platform submitted for tenant and decodes
// its data. The session id is the CloudEvents "subject" attribute. On success
// the returned Session's event carries the tenant extension; e is not modified. Errors are *FieldError (wrapping
// ErrInvalidEvent) or ErrTenantMismatch.
func ValidateIngest(e event.Event, tenant string) (*Session, error) {
	return validateIngest(e, tenant, true)
}

// CheckIngest is ValidateIngest for a caller that needs the verdict, not
// the decoded data: the same checks and errors, but a message whose data
// is certainly valid is checked in one pass over its bytes (checkMessage)
// and not decoded, so the returned Session's Message may be nil. The other
// types are decoded as ValidateIngest does.
func CheckIngest(e event.Event, tenant string) (*Session, error) {
	return validateIngest(e, tenant, false)
}

func validateIngest(e event.Event, tenant string, decode bool) (*Session, error) {
	if err := ValidateID(tenant); err != nil {
		return nil, &FieldError{Field: "tenant", Reason: err.Error()}
	}
	if err := validateAttributes(e); err != nil {
		return nil, err
	}
	if !IngestTypes[e.Type()] {
		return nil, &FieldError{Field: "type", Reason: fmt.Sprintf("unknown event type %q (accepted: %s)", e.Type(), strings.Join(ingestTypeList(), ", "))}
	}
	if err := ValidateID(e.Subject()); err != nil {
		return nil, &FieldError{Field: "subject", Reason: "session id: " + err.Error()}
	}
	// Extensions returns a copy of the map: read it once.
	v, stamped := e.Extensions()[ExtTenant]
	if stamped {
		if s, _ := v.(string); s != tenant {
			return nil, ErrTenantMismatch
		}
	}
	if ct := e.DataContentType(); ct != "" && !isJSONContentType(ct) {
		return nil, &FieldError{Field: "datacontenttype", Reason: fmt.Sprintf("%q is not JSON (use application/json)", ct)}
	}
	s := &Session{Tenant: tenant, Session: e.Subject(), Event: e}
	if err := s.decodeData(e.Data(), decode); err != nil {
		return nil, err
	}
	if !stamped {
		// Copies of an event share their extension map: stamp the
		// tenant on a copy of the attributes so the caller's event is
		// left as it was. The data is read-only and shared.
		s.Event = event.Event{Context: e.Context.Clone(), DataEncoded: e.DataEncoded, DataBase64: e.DataBase64}
		s.Event.SetExtension(ExtTenant, tenant)
	}
	return s, nil
}

// decodeData checks data as the data of s.Event's type and decodes it into
// the matching field of s; with decode false, a message certainly valid is
// only checked (s.Message stays nil).
func (s *Session) decodeData(data []byte, decode bool) error {
	plain, err := checkData(data)
	if err != nil {
		return err
	}
	switch s.Event.Type() {
	case TypeMessage:
		if !decode && plain && checkMessage(data) {
			return nil
		}
		s.Message = new(Message)
		if err = decodeStrict(data, s.Message, plain); err == nil {
			err = s.Message.Validate()
		}
	case TypeSessionCompacting:
		s.Compacting = new(SessionCompacting)
		err = decodeStrict(data, s.Compacting, plain)
	case TypeSessionCompacted:
		s.Compacted = new(SessionCompacted)
		if err = decodeStrict(data, s.Compacted, plain); err == nil && (s.Compacted.PreTokens < 0 || s.Compacted.PostTokens < 0) {
			err = &FieldError{Field: "data.post_tokens", Reason: "token counts must not be negative"}
		}
	case TypeSessionEnded:
		s.Ended = new(SessionEnded)
		err = decodeStrict(data, s.Ended, plain)
	case TypeSessionStarted:
		s.Started = new(SessionStarted)
		if err = decodeStrict(data, s.Started, plain); err == nil {
			err = s.Started.Validate()
		}
	}
	return err
}

func validateAttributes(e event.Event) error {
	if e.SpecVersion() != event.CloudEventsVersionV1 {
		return &FieldError{Field: "specversion", Reason: fmt.Sprintf("%q is not supported (use \"1.0\")", e.SpecVersion())}
	}
	if e.ID() == "" {
		return &FieldError{Field: "id", Reason: "required"}
	}
	if len(e.ID()) > 256 || !utf8.ValidString(e.ID()) || strings.ContainsFunc(e.ID(), isControl) {
		return &FieldError{Field: "id", Reason: "must be at most 256 bytes of printable UTF-8"}
	}
	if e.Source() == "" {
		return &FieldError{Field: "source", Reason: "required"}
	}
	if e.Type() == "" {
		return &FieldError{Field: "type", Reason: "required"}
	}
	if e.Subject() == "" {
		return &FieldError{Field: "subject", Reason: "required: the session id"}
	}
	if err := e.Validate(); err != nil {
		return &FieldError{Field: "event", Reason: err.Error()}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

func isJSONContentType(ct string) bool {
	ct = strings.TrimSpace(strings.ToLower(strings.SplitN(ct, ";", 2)[0]))
	return ct == "application/json" || strings.HasSuffix(ct, "+json") || ct == "text/json"
}

func ingestTypeList() []string {
	return []string{TypeMessage, TypeSessionStarted, TypeSessionCompacting, TypeSessionCompacted, TypeSessionEnded}
}

// checkData rejects missing data, invalid UTF-8 and JSON nested deeper than
// MaxDepth before any decoding happens. It reports whether data is plain:
// no control bytes besides JSON whitespace (see fastSafe).
func checkData(data []byte) (plain bool, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return false, &FieldError{Field: "data", Reason: "required"}
	}
	if !utf8.Valid(data) {
		return false, &FieldError{Field: "data", Reason: "not valid UTF-8"}
	}
	plain = true
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
			plain = false
		}
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			if depth > MaxDepth {
				return false, &FieldError{Field: "data", Reason: fmt.Sprintf("nested deeper than %d levels", MaxDepth)}
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return plain, nil
}

// decodeStrict decodes data into v rejecting unknown fields. plain says
// checkData found data safe for the fast decoder.
func decodeStrict(data []byte, v any, plain bool) error {
	if plain && fastStrict(data, v) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &FieldError{Field: "data", Reason: describeJSONError(err)}
	}
	if dec.More() {
		return &FieldError{Field: "data", Reason: "trailing data after the JSON value"}
	}
	return nil
}

func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value)
	}
	return "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

// Validate checks a decoded message: required fields, roles, block shapes
// and limits. Errors are *FieldError with paths under "data.".
func (m *Message) Validate() error {
	if m.UUID == "" {
		return &FieldError{Field: "data.uuid", Reason: "required"}
	}
	if len(m.UUID) > 256 || strings.ContainsFunc(m.UUID, isControl) {
		return &FieldError{Field: "data.uuid", Reason: "must be at most 256 printable characters"}
	}
	if m.Role != RoleUser && m.Role != RoleAssistant {
		return &FieldError{Field: "data.role", Reason: fmt.Sprintf("%q is not a role (use \"user\" or \"assistant\")", m.Role)}
	}
	switch m.QuerySource {
	case "", QueryMain, QuerySubagent:
	default:
		return &FieldError{Field: "data.query_source", Reason: fmt.Sprintf("%q is not a query source (use \"main\" or \"subagent\")", m.QuerySource)}
	}
	if len(m.Content) == 0 {
		return &FieldError{Field: "data.content", Reason: "required: at least one block"}
	}
	if m.Usage != nil && (m.Usage.InputTokens < 0 || m.Usage.OutputTokens < 0 || m.Usage.CacheCreationInputTokens < 0 || m.Usage.CacheReadInputTokens < 0) {
		return &FieldError{Field: "data.usage", Reason: "token counts must not be negative"}
	}
	n := 0
	return validateBlocks(m.Content, "data.content", &n, 0)
}

func validateBlocks(blocks Content, path string, n *int, depth int) error {
	for i := range blocks {
		*n++
		if *n > MaxBlocks {
			return &FieldError{Field: path, Reason: fmt.Sprintf("more than %d content blocks", MaxBlocks)}
		}
		b := &blocks[i]
		p := fmt.Sprintf("%s[%d]", path, i)
		switch b.Type {
		case BlockText:
		case BlockThinking, BlockRedactedThinking:
		case BlockToolUse:
			if b.ID == "" {
				return &FieldError{Field: p + ".id", Reason: "required for tool_use"}
			}
			if b.Name == "" {
				return &FieldError{Field: p + ".name", Reason: "required for tool_use"}
			}
			if len(b.Input) > 0 && !json.Valid(b.Input) {
				return &FieldError{Field: p + ".input", Reason: "not valid JSON"}
			}
		case BlockToolResult:
			if b.ToolUseID == "" {
				return &FieldError{Field: p + ".tool_use_id", Reason: "required for tool_result"}
			}
			if depth >= 2 {
				return &FieldError{Field: p + ".content", Reason: "tool_result nested inside tool_result"}
			}
			if err := validateBlocks(b.Content, p+".content", n, depth+1); err != nil {
				return err
			}
		case BlockImage, BlockDocument:
		case "":
			return &FieldError{Field: p + ".type", Reason: "required"}
		default:
			return &FieldError{Field: p + ".type", Reason: fmt.Sprintf("unknown block type %q", b.Type)}
		}
	}
	return nil
}
