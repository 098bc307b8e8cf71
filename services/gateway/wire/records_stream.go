package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/recallhq/recall/pkg/events"
)

// ErrReplyTooLarge is returned by an Assembler fed more than its limit.
var ErrReplyTooLarge = errors.New("reply too large to capture")

// Assembler reassembles a model response from its bytes as they pass —
// an SSE stream event by event, or a JSON body — into a Reply, keeping
// only what the Reply needs (text, tool inputs, usage), never the whole
// stream. Write never fails the caller's copy: an error means the reply
// will not be captured (Reply returns it). Not safe for concurrent use.
type Assembler struct {
	provider string // "anthropic", "chat" or "responses"
	stream   bool
	limit    int
	sse      sseReader
	body     bytes.Buffer // a JSON body (not a stream), up to limit
	reply    Reply
	blocks   map[int]*partial // Anthropic blocks / Chat tool calls being built
	order    []int
	done     bool
	err      error
}

type partial struct {
	block events.Block
	input bytes.Buffer
	tc    ChatToolCall
}

// Assembler providers.
const (
	ReplyAnthropic = "anthropic"
	ReplyChat      = "chat"
	ReplyResponses = "responses"
)

// NewAssembler returns an assembler of a provider's reply (ReplyAnthropic,
// ReplyChat or ReplyResponses), stream or JSON body, keeping at most limit
// bytes (a line of a stream, the text and inputs it accumulates, a body).
func NewAssembler(provider string, stream bool, limit int) *Assembler {
	a := &Assembler{provider: provider, stream: stream, limit: limit, blocks: map[int]*partial{}}
	a.sse.limit = limit
	a.sse.event = a.event
	return a
}

// Write feeds the next bytes of the response; it always returns len(p).
func (a *Assembler) Write(p []byte) (int, error) {
	if a.err != nil || a.done && a.stream {
		return len(p), nil
	}
	if !a.stream {
		if a.body.Len()+len(p) > a.limit {
			a.err = ErrReplyTooLarge
			return len(p), nil
		}
		a.body.Write(p)
		return len(p), nil
	}
	if err := a.sse.write(p); err != nil {
		a.err = err
	}
	return len(p), nil
}

// Reply returns the complete reply (a JSON body is decoded at the first
// call: call it once the body is whole), or an error when the response ended
// before it was complete (a stream cut short, an error event, a body that
// is not the API's shape) or was too large.
func (a *Assembler) Reply() (*Reply, error) {
	if a.err == nil && !a.stream && !a.done {
		a.err = a.decodeBody(a.body.Bytes())
		a.body = bytes.Buffer{}
	}
	if a.err != nil {
		return nil, a.err
	}
	if !a.done {
		return nil, errors.New("the response ended before it was complete")
	}
	return &a.reply, nil
}

// Done reports whether a complete reply has been seen.
func (a *Assembler) Done() bool { return a.done && a.err == nil }

// ResponseID is the reply's id once known ("" before).
func (a *Assembler) ResponseID() string { return a.reply.ID }

func (a *Assembler) event(name string, data []byte) error {
	switch a.provider {
	case ReplyAnthropic:
		return a.anthropicEvent(data)
	case ReplyChat:
		return a.chatChunk(data)
	default:
		return a.responsesEvent(name, data)
	}
}

func (a *Assembler) decodeBody(b []byte) error {
	switch a.provider {
	case ReplyAnthropic:
		var r Response
		if err := json.Unmarshal(b, &r); err != nil || r.Type != "message" {
			return fmt.Errorf("%w: not a message (%v)", ErrBadBody, err)
		}
		a.setAnthropic(r.ID, r.Model, r.StopReason, r.Content, r.Usage)
	case ReplyChat:
		var r chatResponse
		if err := json.Unmarshal(b, &r); err != nil || len(r.Choices) == 0 {
			return fmt.Errorf("%w: not a chat completion (%v)", ErrBadBody, err)
		}
		m := r.Choices[0].Message
		m.Role = events.RoleAssistant
		a.reply = Reply{ID: r.ID, Model: r.Model, StopReason: r.Choices[0].FinishReason, Usage: r.Usage.usage(), Chat: &m}
	default:
		if err := a.setResponses(b); err != nil {
			return err
		}
		if a.reply.StopReason != "completed" {
			return fmt.Errorf("the response is %s, not completed", a.reply.StopReason)
		}
	}
	a.done = true
	return nil
}

func (a *Assembler) setAnthropic(id, model, stop string, c events.Content, u events.Usage) {
	a.reply = Reply{ID: id, Model: model, StopReason: stop, Usage: u,
		Anthropic: &Msg{Message: events.Message{Role: events.RoleAssistant, Content: c}}}
}

// grow accounts n more bytes kept against the limit.
func (a *Assembler) grow(n int) error {
	a.limit -= n
	if a.limit < 0 {
		return ErrReplyTooLarge
	}
	return nil
}

// sseReader splits an SSE stream into events (event name, data lines
// joined by newlines), keeping at most limit bytes of a pending event.
type sseReader struct {
	limit int
	line  []byte
	name  string
	data  []byte
	event func(name string, data []byte) error
}

func (s *sseReader) write(p []byte) error {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(s.line)+len(p) > s.limit {
				return ErrReplyTooLarge
			}
			s.line = append(s.line, p...)
			return nil
		}
		line := p[:i]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		if err := s.field(bytes.TrimSuffix(line, []byte("\r"))); err != nil {
			return err
		}
		s.line = s.line[:0]
		p = p[i+1:]
	}
	return nil
}

func (s *sseReader) field(line []byte) error {
	if len(line) == 0 {
		name, data := s.name, s.data
		s.name, s.data = "", s.data[:0]
		if len(data) == 0 {
			return nil
		}
		return s.event(name, data)
	}
	k, v, _ := bytes.Cut(line, []byte(":"))
	v = bytes.TrimPrefix(v, []byte(" "))
	switch string(k) {
	case "event":
		s.name = string(v)
	case "data":
		if len(s.data)+len(v) > s.limit {
			return ErrReplyTooLarge
		}
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, v...)
	}
	return nil
}
