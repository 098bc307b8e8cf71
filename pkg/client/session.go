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
// service error: the code and description are in the message).
var ErrService = errors.New("recall service error")

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
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encoding the %s request: %w", verb, err)
	}
	subject := events.APISubject(verb, c.tenant, session)
	m, err := chunked.Request(ctx, c.js.Conn(), subject, nil, data)
	if err != nil {
		return fmt.Errorf("requesting %s: %w", subject, err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return fmt.Errorf("%w %s on %s: %s", ErrService, code, subject, m.Header.Get("Nats-Service-Error"))
	}
	if err := json.Unmarshal(m.Data, out); err != nil {
		return fmt.Errorf("decoding the %s reply: %w", verb, err)
	}
	return nil
}
