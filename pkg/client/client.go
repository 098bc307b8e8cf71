// Package client is the Go client platforms use to publish session events to
// Recall over NATS, for trusted producers that may write to the transcript
// stream directly.
//
// Publish and PublishBatch return only after JetStream acknowledged every
// event, so a nil error means the events are durably stored. The event id,
// scoped by tenant, is the Nats-Msg-Id: publishing the same event twice, for
// example when retrying after a timeout, stores it once.
package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// Client publishes one tenant's events. It is safe for concurrent use.
type Client struct {
	js     jetstream.JetStream
	tenant string
}

// New returns a client publishing as tenant through js.
func New(js jetstream.JetStream, tenant string) (*Client, error) {
	if err := events.ValidateID(tenant); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	return &Client{js: js, tenant: tenant}, nil
}

// Result is the outcome of one published event.
type Result struct {
	// Seq is the transcript stream sequence the event is stored at.
	Seq uint64
	// Duplicate is true when the event id had been stored before; Seq is
	// then the original's sequence.
	Duplicate bool
	// Err is the validation or publish error, nil on success.
	Err error
}

// Msg validates e as an event of the client's tenant and encodes it as the
// NATS message to publish (binary mode, Nats-Msg-Id, trace context of ctx).
func (c *Client) Msg(ctx context.Context, e event.Event) (*nats.Msg, error) {
	s, err := events.ValidateIngest(e, c.tenant)
	if err != nil {
		return nil, err
	}
	m := natsce.NewMsg(events.TranscriptSubject(c.tenant, s.Session), &s.Event)
	m.Header.Set(jetstream.MsgIDHeader, events.DedupID(c.tenant, e.ID()))
	natsce.Inject(ctx, m.Header)
	return m, nil
}

// Publish stores one event and returns once JetStream acknowledged it.
func (c *Client) Publish(ctx context.Context, e event.Event) (Result, error) {
	m, err := c.Msg(ctx, e)
	if err != nil {
		return Result{Err: err}, err
	}
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		err = fmt.Errorf("publishing event %s: %w", e.ID(), err)
		return Result{Err: err}, err
	}
	return Result{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// PublishBatch validates and publishes events asynchronously and waits for
// every acknowledgement. Results are in input order. Invalid events are not
// published and do not stop the valid ones; the error is non-nil when any
// event failed.
func (c *Client) PublishBatch(ctx context.Context, evs []event.Event) ([]Result, error) {
	res := make([]Result, len(evs))
	futures := make([]jetstream.PubAckFuture, len(evs))
	var failed int
	for i, e := range evs {
		m, err := c.Msg(ctx, e)
		if err != nil {
			res[i].Err = err
			failed++
			continue
		}
		f, err := c.js.PublishMsgAsync(m)
		if err != nil {
			res[i].Err = fmt.Errorf("publishing event %s: %w", e.ID(), err)
			failed++
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			res[i] = Result{Seq: ack.Sequence, Duplicate: ack.Duplicate}
		case err := <-f.Err():
			res[i].Err = fmt.Errorf("publishing event %s: %w", evs[i].ID(), err)
			failed++
		case <-ctx.Done():
			res[i].Err = ctx.Err()
			failed++
		}
	}
	if failed > 0 {
		return res, fmt.Errorf("%d of %d events failed: %w", failed, len(evs), errors.Join(firstErr(res)))
	}
	return res, nil
}

func firstErr(res []Result) error {
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}
