package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
)

// ErrService is wrapped by errors a Recall service answered with (a micro
// service error: the code and description are in the message). Use
// errors.As with *ServiceError for the code.
var ErrService = errors.New("recall service error")

// ServiceError is a refusal a Recall service answered with: Code is an
// HTTP-like status ("400" bad request, "404" nothing there, "422" nothing to
// do, "503" busy or unavailable, "504" timed out) and Description says why.
type ServiceError struct {
	Subject     string
	Code        string
	Description string
	// Problem is the RFC 9457 problem document some refusals carry (an
	// ambiguous reference lists its candidates); nil otherwise.
	Problem json.RawMessage
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("%v %s on %s: %s", ErrService, e.Code, e.Subject, e.Description)
}

// Is makes errors.Is(err, ErrService) true.
func (e *ServiceError) Is(target error) bool { return target == ErrService }

// Memory returns session's memory record and its revision; a session
// without memory yet is a *ServiceError with Code "404".
func (c *Client) Memory(ctx context.Context, session string) (*events.MemoryReply, error) {
	var reply events.MemoryReply
	if err := c.request(ctx, events.VerbMemory, session, nil, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// Extract asks for an extraction of session now, bypassing the thresholds
// (the trigger queues it and waits for the extractor), and returns its
// outcome. A session without records is a *ServiceError with Code "422"; a
// wait longer than r.TimeoutMS (or the trigger's default) is Code "504" —
// the extraction goes on in the background. Give ctx a deadline longer than
// the wait.
func (c *Client) Extract(ctx context.Context, session string, r events.ExtractRequest) (*events.ExtractResult, error) {
	var reply events.ExtractResult
	if err := c.request(ctx, events.VerbExtract, session, r, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// Compact asks Recall to compact session (see events.CompactRequest) and
// returns the reply, whatever its outcome; an error means no reply came or
// the service refused the request. Large replies arrive in chunks and are
// reassembled. ctx bounds the whole exchange (30 s when it has no
// deadline; give more when the request may wait for an extraction).
func (c *Client) Compact(ctx context.Context, session string, r events.CompactRequest) (*events.CompactReply, error) {
	var reply events.CompactReply
	if err := c.request(ctx, events.VerbCompact, session, r, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// Edit asks which blocks of session's current context to clear by the
// request's strategies (see events.EditRequest); the platform then edits its
// own context. The same transcript and request always give the same reply.
func (c *Client) Edit(ctx context.Context, session string, r events.EditRequest) (*events.EditReply, error) {
	var reply events.EditReply
	if err := c.request(ctx, events.VerbEdit, session, r, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// request sends body to the verb's endpoint of session and decodes the
// reply into out.
func (c *Client) request(ctx context.Context, verb, session string, body, out any) error {
	if err := events.ValidateID(session); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encoding the %s request: %w", verb, err)
		}
	}
	subject := events.APISubject(verb, c.tenant, session)
	m, err := chunked.Request(ctx, c.js.Conn(), subject, nil, data)
	if err != nil {
		return fmt.Errorf("requesting %s: %w", subject, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		se := &ServiceError{Subject: subject, Code: code, Description: m.Header.Get("Nats-Service-Error")}
		if len(m.Data) > 0 && json.Valid(m.Data) {
			se.Problem = json.RawMessage(m.Data)
		}
		return se
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return fmt.Errorf("decoding the %s reply: %w", verb, err)
	}
	return nil
}
