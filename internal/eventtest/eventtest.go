// Package eventtest builds Recall CloudEvents for tests: the messages,
// tool calls and session lifecycle events a platform sends, with ids,
// subject, source, the tenant extension and data filled in the way ingest
// stores them. It is the one fixture builder of Recall's tests; a test that
// writes event.New() by hand is testing the CloudEvents codec itself.
//
// A Session names where the events go; its methods take an id that is
// unique within the session (a message's uuid too) and return an
// event.Event, so a test reads as the conversation it replays:
//
//	s := eventtest.NewSession("acme", "s1")
//	eventtest.Publish(ctx, t, js, layout, s.Started("start", events.SessionStarted{UserID: "u1"}),
//		s.User("m1", "I prefer tabs."), s.Ended("end"))
//
// Nothing here checks what it builds: hostile or invalid events are built
// the same way (or by hand) and are the receiver's to refuse.
package eventtest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// DefaultSource is the source of events whose Session has none.
const DefaultSource = "/test"

// Session builds the events of one session. Its methods are safe for
// concurrent use (a Session is never changed by them).
type Session struct {
	// Tenant is the events' tenant extension (recalltenant). Empty leaves
	// it off, as a platform sends events over HTTP or NATS (ingest sets it
	// from the credentials); Publish needs it.
	Tenant string
	// ID is the session: every event's subject.
	ID string
	// Source is every event's source; empty is DefaultSource.
	Source string
}

// NewSession is the Session of tenant and session with DefaultSource.
func NewSession(tenant, session string) Session {
	return Session{Tenant: tenant, ID: session, Source: DefaultSource}
}

// Event is an event of type typ with data (JSON-encoded; []byte and
// json.RawMessage are taken as JSON text). Its id is "<session>-<id>".
func (s Session) Event(id, typ string, data any) event.Event {
	src := s.Source
	if src == "" {
		src = DefaultSource
	}
	e := event.New()
	e.SetID(s.ID + "-" + id)
	e.SetSource(src)
	e.SetType(typ)
	e.SetSubject(s.ID)
	if s.Tenant != "" {
		e.SetExtension(events.ExtTenant, s.Tenant)
	}
	switch d := data.(type) {
	case nil:
	case []byte: // JSON text as is (SetData would mark bytes base64)
		e.SetDataContentType(event.ApplicationJSON)
		e.DataEncoded = d
	case json.RawMessage:
		e.SetDataContentType(event.ApplicationJSON)
		e.DataEncoded = d
	default:
		if err := e.SetData(event.ApplicationJSON, data); err != nil {
			panic("eventtest: encoding the data of " + typ + ": " + err.Error())
		}
	}
	return e
}

// Message is a transcript message; an empty m.UUID becomes id.
func (s Session) Message(id string, m events.Message) event.Event {
	if m.UUID == "" {
		m.UUID = id
	}
	return s.Event(id, events.TypeMessage, m)
}

// User is a user message of one text block.
func (s Session) User(id, text string) event.Event {
	return s.Message(id, events.Message{Role: events.RoleUser, Content: Text(text)})
}

// Peer is a user message of one text block from peer (multi-agent
// platforms).
func (s Session) Peer(id, peer, text string) event.Event {
	return s.Message(id, events.Message{Role: events.RoleUser, PeerID: peer, Content: Text(text)})
}

// Assistant is a complete assistant answer of one text block: stop reason
// end_turn, message id "msg-<id>".
func (s Session) Assistant(id, text string) event.Event {
	return s.Message(id, events.Message{Role: events.RoleAssistant, MessageID: "msg-" + id, StopReason: "end_turn", Content: Text(text)})
}

// ToolUse is an assistant message calling tool name with input (JSON
// text) as call toolID: stop reason tool_use, message id "msg-<id>".
func (s Session) ToolUse(id, toolID, name, input string) event.Event {
	return s.Message(id, events.Message{Role: events.RoleAssistant, MessageID: "msg-" + id, StopReason: "tool_use",
		Content: events.Content{{Type: events.BlockToolUse, ID: toolID, Name: name, Input: json.RawMessage(input)}}})
}

// ToolResult is the user message answering call toolID with output.
func (s Session) ToolResult(id, toolID, output string, isError bool) event.Event {
	return s.Message(id, events.Message{Role: events.RoleUser,
		Content: events.Content{{Type: events.BlockToolResult, ToolUseID: toolID, IsError: isError, Content: Text(output)}}})
}

// Started is the session's dev.recall.session.started.
func (s Session) Started(id string, st events.SessionStarted) event.Event {
	return s.Event(id, events.TypeSessionStarted, st)
}

// Ended is the session's dev.recall.session.ended.
func (s Session) Ended(id string) event.Event {
	return s.Event(id, events.TypeSessionEnded, events.SessionEnded{})
}

// Compacted is the platform's dev.recall.session.compacted.
func (s Session) Compacted(id string, c events.SessionCompacted) event.Event {
	return s.Event(id, events.TypeSessionCompacted, c)
}

// Text is content of one text block.
func Text(text string) events.Content {
	return events.Content{{Type: events.BlockText, Text: text}}
}

// Map is e in structured JSON mode as a map, for HTTP bodies built beside
// other JSON (a batch is a JSON array of them).
func Map(e event.Event) map[string]any {
	b, err := json.Marshal(e)
	if err != nil {
		panic("eventtest: encoding " + e.ID() + ": " + err.Error())
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic("eventtest: decoding " + e.ID() + ": " + err.Error())
	}
	return m
}

// Maps is Map of each event, in order.
func Maps(evs ...event.Event) []map[string]any {
	out := make([]map[string]any, len(evs))
	for i, e := range evs {
		out[i] = Map(e)
	}
	return out
}

// Publisher is the JetStream publish call Publish needs.
type Publisher interface {
	PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Publish stores each event, in order, in binary mode on its session's
// subject of layout (the shard of its tenant extension and subject), as
// ingest does without its deduplication id, and returns their stream
// sequences. It fails the test on an event without a tenant or on a
// refused publish; it must run on the test's goroutine.
func Publish(ctx context.Context, t testing.TB, js Publisher, layout events.Layout, evs ...event.Event) []uint64 {
	t.Helper()
	seqs := make([]uint64, len(evs))
	for i := range evs {
		tenant, _ := evs[i].Extensions()[events.ExtTenant].(string)
		if tenant == "" || evs[i].Subject() == "" {
			t.Fatalf("eventtest: event %s has no tenant extension or no subject to publish to", evs[i].ID())
		}
		ack, err := js.PublishMsg(ctx, natsce.NewMsg(layout.Subject(tenant, evs[i].Subject()), &evs[i]))
		if err != nil {
			t.Fatalf("eventtest: publishing %s: %v", evs[i].ID(), err)
		}
		seqs[i] = ack.Sequence
	}
	return seqs
}
