// Package eventpub builds and publishes the CloudEvents Recall itself
// produces (extraction requests, extraction outcomes, compaction notices, and
// the events of the services added later), so they all share one shape:
//
//   - source "/recall/<component>" (Source);
//   - time in UTC, subject = the session id, the tenant extension set;
//   - id = the event's Key when it has one, else a fresh UUID;
//   - Nats-Msg-Id = the id, so an event re-emitted for the same effect after
//     a restart or a redelivery is stored once (keys carry the tenant, so
//     tenants cannot collide), and an event without a key is never
//     deduplicated;
//   - binary-mode encoding (pkg/events/natsce) with the caller's trace
//     context injected.
//
// Publishing is synchronous: Publish returns once JetStream stored the event
// or the context ended. Components that pipeline publishes build messages
// with Msg and publish them themselves.
package eventpub

import (
	"context"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// Source is the CloudEvents source of a Recall component ("trigger",
// "extractor", "compactor", ...).
func Source(component string) string { return "/recall/" + component }

// Event is one event a component produces.
type Event struct {
	Type    string
	Tenant  string
	Session string
	// Key identifies the effect the event reports (e.g. an extraction
	// request's RequestDedupID). It must be unique across tenants; empty
	// means a fresh UUID and no deduplication.
	Key string
	// Data is marshalled as JSON.
	Data any
}

// Build returns ev as a CloudEvent produced by component.
func Build(component string, ev Event) (event.Event, error) {
	e := event.New()
	id := ev.Key
	if id == "" {
		id = uuid.NewString()
	}
	e.SetID(id)
	e.SetSource(Source(component))
	e.SetType(ev.Type)
	e.SetSubject(ev.Session)
	e.SetTime(time.Now().UTC())
	e.SetExtension(events.ExtTenant, ev.Tenant)
	if err := e.SetData(event.ApplicationJSON, ev.Data); err != nil {
		return e, fmt.Errorf("encoding %s: %w", ev.Type, err)
	}
	return e, nil
}

// Msg encodes e for subject: binary mode, Nats-Msg-Id = e's id, and the
// trace context of ctx.
func Msg(ctx context.Context, subject string, e *event.Event) *nats.Msg {
	m := natsce.NewMsg(subject, e)
	m.Header.Set(jetstream.MsgIDHeader, e.ID())
	natsce.Inject(ctx, m.Header)
	return m
}

// Publisher publishes one component's events.
type Publisher struct {
	js        jetstream.Publisher
	component string
}

// New returns a Publisher for component.
func New(js jetstream.Publisher, component string) *Publisher {
	return &Publisher{js: js, component: component}
}

// Publish stores ev on subject and returns once JetStream acknowledged it;
// errors are wrapped with the event type and subject.
func (p *Publisher) Publish(ctx context.Context, subject string, ev Event) error {
	e, err := Build(p.component, ev)
	if err != nil {
		return err
	}
	if _, err := p.js.PublishMsg(ctx, Msg(ctx, subject, &e)); err != nil {
		return fmt.Errorf("publishing %s on %s: %w", ev.Type, subject, err)
	}
	return nil
}
