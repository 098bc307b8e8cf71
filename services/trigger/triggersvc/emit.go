package triggersvc

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
)

// emitter publishes a lane's decisions and tells when every one of them is
// stored. It is owned by one lane goroutine and is not safe for concurrent
// use.
type emitter struct {
	js      jetstream.JetStream
	log     *slog.Logger
	futures []jetstream.PubAckFuture
	// epoch counts completed awaits: a session whose last publication is
	// of the current epoch may still be in flight.
	epoch uint64
}

// publish sends m asynchronously; when the client cannot take it (too
// many publications in flight, e.g. during an outage) it publishes
// synchronously with retry until stored or ctx is done.
func (e *emitter) publish(ctx context.Context, m *nats.Msg) error {
	f, err := e.js.PublishMsgAsync(m)
	if err == nil {
		e.futures = append(e.futures, f)
		return nil
	}
	return e.publishSync(ctx, m)
}

// publishSync publishes m until JetStream stores it (the dedup id makes
// retries harmless) or ctx is done.
func (e *emitter) publishSync(ctx context.Context, m *nats.Msg) error {
	return effects.Do(ctx, e.log, "publishing extraction request "+m.Subject, func(ctx context.Context) error {
		_, err := e.js.PublishMsg(ctx, m)
		return err
	})
}

// await returns nil once every publication is stored: failed asynchronous
// ones are published again, synchronously, until stored. It returns
// ctx.Err() when ctx ends first; the publications not confirmed stay
// pending (the caller must not acknowledge past them).
func (e *emitter) await(ctx context.Context) error {
	for len(e.futures) > 0 {
		f := e.futures[0]
		select {
		case <-f.Ok():
		case <-f.Err():
			if err := e.publishSync(ctx, f.Msg()); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		e.futures[0] = nil
		e.futures = e.futures[1:]
	}
	e.futures = nil
	e.epoch++
	return nil
}

// pending is the number of publications not confirmed yet.
func (e *emitter) pending() int { return len(e.futures) }

// decide publishes a threshold decision of session s to RECALL_EXTRACT and
// RECALL_EVENTS (or counts it as gated).
func (l *lane) decide(ctx context.Context, s *session, d memory.TriggerDecision, traceparent string, gated bool) error {
	deps := l.deps
	if gated {
		deps.stats.gated.Add(1)
		deps.m.decisions.Add(ctx, 1, reasonAttr("gated"))
		return nil
	}
	req := events.ExtractionRequested{
		Tenant: s.tenant(), Session: s.session(), UpToSeq: d.UpToSeq, UpToID: d.UpToID,
		Reason: events.ReasonThreshold, Counters: d.Counters,
	}
	sctx := ctx
	if traceparent != "" {
		sctx = natsce.Extract(sctx, nats.Header{"traceparent": []string{traceparent}})
	}
	sctx, span := deps.tracer.Start(sctx, "trigger.decision", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("recall.tenant", req.Tenant), attribute.String("recall.session", req.Session),
			attribute.Int64("recall.up_to_seq", int64(req.UpToSeq)), attribute.Int64("recall.tokens", d.Counters.Tokens),
			attribute.Int("recall.tool_calls_since", d.Counters.ToolCallsSince), attribute.Bool("recall.natural_break", d.Counters.NaturalBreak)))
	defer span.End()
	// One session's requests are stored in decision order: an earlier one
	// still in flight (it could fail and be republished after this one,
	// e.g. across a stream leader change) is confirmed first. Decisions of
	// one session are rare, so this costs little.
	if s.pubEpoch == l.em.epoch && l.em.pending() > 0 {
		if err := l.em.await(ctx); err != nil {
			l.failed = true
			return err
		}
	}
	s.pubEpoch = l.em.epoch
	for _, m := range requestMsgs(sctx, req) {
		if err := l.em.publish(ctx, m); err != nil {
			// The state moved past this decision: nothing may be
			// acknowledged any more (the records are redelivered).
			l.failed = true
			return err
		}
	}
	deps.stats.decisions.Add(1)
	deps.m.decisions.Add(ctx, 1, reasonAttr(events.ReasonThreshold))
	return nil
}

// requestMsgs encodes an extraction request as binary-mode CloudEvents for
// RECALL_EXTRACT and RECALL_EVENTS, deduplicated by RequestDedupID.
func requestMsgs(ctx context.Context, req events.ExtractionRequested) [2]*nats.Msg {
	// An ExtractionRequested always marshals.
	e, _ := eventpub.Build(Component, eventpub.Event{Type: events.TypeExtractionRequested, Tenant: req.Tenant,
		Session: req.Session, Key: req.RequestDedupID(), Data: req})
	return [2]*nats.Msg{
		eventpub.Msg(ctx, events.ExtractSubject(req.Tenant, req.Session), &e),
		eventpub.Msg(ctx, events.EventsSubject(events.KindExtractionRequested, req.Tenant, req.Session), &e),
	}
}
