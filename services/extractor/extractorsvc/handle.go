package extractorsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/retry"
)

// request is one decoded extraction request.
type request struct {
	events.ExtractionRequested
	id string // CloudEvent id
}

func decodeRequest(m *pcgroup.Msg) (request, error) {
	e, err := natsce.FromMsg(&nats.Msg{Subject: m.Subject(), Header: m.Headers(), Data: m.Data()})
	if err != nil {
		return request{}, fmt.Errorf("decoding extraction request: %w", err)
	}
	var r request
	if err := json.Unmarshal(e.Data(), &r.ExtractionRequested); err != nil {
		return request{}, fmt.Errorf("decoding extraction request data: %w", err)
	}
	r.id = e.ID()
	if events.ValidateID(r.Tenant) != nil || events.ValidateID(r.Session) != nil || r.UpToSeq == 0 {
		return r, fmt.Errorf("extraction request %q has an invalid tenant, session or up_to_seq", e.ID())
	}
	return r, nil
}

// handle is the pcgroup handler: one extraction request.
func (w *Worker) handle(ctx context.Context, m *pcgroup.Msg) error {
	start := time.Now()
	ctx, span, delivered := w.startSpan(ctx, m)
	defer span.End()

	req, err := decodeRequest(m)
	if err != nil {
		w.log.ErrorContext(ctx, "parking an invalid extraction request", "subject", m.Subject(), "err", err)
		w.fail(ctx, m, req, ReasonInvalidRequest, err, delivered)
		w.observe(ctx, start, OutcomeFailed, events.TokenUsage{})
		return nil
	}
	span.SetAttributes(attribute.String("recall.tenant", req.Tenant), attribute.String("recall.session", req.Session),
		attribute.Int64("recall.up_to_seq", int64(req.UpToSeq)))
	log := w.log.With("tenant", req.Tenant, "session", req.Session, "up_to_seq", req.UpToSeq)

	res, err := w.run(ctx, m, req, log)
	if err != nil {
		var settled bool
		if res, settled, err = w.settleFailure(ctx, m, req, res, err, start, delivered, log); settled {
			return err
		}
	}
	return w.complete(ctx, m, req, res, start, delivered, log)
}

// startSpan starts the extraction's span, continuing the trace of the
// message whose response triggered it (so one trace runs from the publisher
// to the completion event) and linking to it for tools that follow links;
// it returns the delivery count too.
func (w *Worker) startSpan(ctx context.Context, m *pcgroup.Msg) (context.Context, trace.Span, int) {
	remote := trace.SpanContextFromContext(natsce.Extract(context.Background(), m.Headers()))
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if remote.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote}))
	}
	ctx, span := tracer.Start(ctx, "extraction", opts...)
	meta, _ := m.Metadata()
	delivered := 1
	if meta != nil {
		delivered = int(meta.NumDelivered)
	}
	span.SetAttributes(attribute.String("recall.worker", w.cfg.WorkerID), attribute.Int("recall.partition", m.Partition),
		attribute.Int("recall.delivery", delivered))
	return ctx, span, delivered
}

// settleFailure handles a run that ended with err: a lost fenced commit
// whose request is covered now continues as skipped (settled false);
// everything else is settled here — parked, nak'ed for a retry, or left
// for the next owner — and its return value is handle's.
func (w *Worker) settleFailure(ctx context.Context, m *pcgroup.Msg, req request, res result, err error, start time.Time, delivered int, log *slog.Logger) (result, bool, error) {
	span := trace.SpanFromContext(ctx)
	switch {
	case errors.Is(err, errConflict):
		// A late worker committed first; its result stands and ours is
		// discarded (never merged). Check again whether the request is
		// covered now.
		cause := w.fenceCause(ctx, req, res.readAt)
		log.WarnContext(ctx, "fenced commit lost; result discarded", "cause", cause, "err", err)
		mem, rev, rerr := w.readMemory(ctx, req.Tenant, req.Session)
		if rerr == nil && req.UpToSeq <= mem.CoveredSeq {
			return result{outcome: OutcomeSkipped, record: mem, revision: rev}, false, nil
		}
		w.observe(ctx, start, OutcomeConflict, res.usage)
		span.SetStatus(codes.Error, "conflict")
		return res, true, m.Nak(100 * time.Millisecond)
	case res.outcome == OutcomeFailed:
		log.ErrorContext(ctx, "extraction failed; parking the request", "reason", res.reason, "err", err)
		span.SetStatus(codes.Error, err.Error())
		w.fail(ctx, m, req, res.reason, err, res.attempts)
		w.observe(ctx, start, OutcomeFailed, res.usage)
		return res, true, nil
	case ctx.Err() != nil:
		// Stopping or handed off past the drain timeout: the message is
		// redelivered to the next owner.
		w.observe(ctx, start, OutcomeRetry, res.usage)
		return res, true, ctx.Err()
	case delivered >= w.cfg.MaxAttempts:
		log.ErrorContext(ctx, "extraction kept failing; parking the request", "deliveries", delivered, "err", err)
		span.SetStatus(codes.Error, err.Error())
		w.fail(ctx, m, req, ReasonInfrastructure, err, delivered)
		w.observe(ctx, start, OutcomeFailed, res.usage)
		return res, true, nil
	}
	log.WarnContext(ctx, "extraction failed; will retry", "deliveries", delivered, "err", err)
	w.observe(ctx, start, OutcomeRetry, res.usage)
	span.SetStatus(codes.Error, err.Error())
	return res, true, m.Nak(retryDelay(delivered))
}

// complete announces a committed (or already covered) request, then acks
// it.
func (w *Worker) complete(ctx context.Context, m *pcgroup.Msg, req request, res result, start time.Time, delivered int, log *slog.Logger) error {
	outcome := res.outcome
	// The memory is committed (or was already): announce, then ack. A crash
	// between the two redelivers the request, which is covered by then and
	// announced again under the same Nats-Msg-Id, so RECALL_EVENTS stores
	// one completion; announcing after the ack would lose it instead.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	done := events.ExtractionCompleted{
		Tenant: req.Tenant, Session: req.Session, UpToSeq: req.UpToSeq,
		CoveredSeq: res.record.CoveredSeq, LastSummarizedID: res.record.LastSummarizedID,
		LastSummarizedSeq: res.record.LastSummarizedSeq, Revision: res.revision,
		Skipped: outcome == OutcomeSkipped, Usage: res.usage, DurationMS: time.Since(start).Milliseconds(),
		Worker: w.cfg.WorkerID, Provider: res.provider, Model: res.model,
		Edits: res.edits, UpToDate: res.upToDate,
	}
	if err := w.publish(actx, events.KindExtractionCompleted, events.TypeExtractionCompleted, req, done); err != nil {
		// Not announced: leave the request for redelivery (it is covered
		// now, so that costs no LLM call).
		log.WarnContext(ctx, "publishing extraction.completed; will redeliver", "err", err)
		w.observe(ctx, start, OutcomeRetry, res.usage)
		return m.Nak(retryDelay(delivered))
	}
	if err := m.Ack(actx); err != nil {
		log.WarnContext(ctx, "acking extraction request", "err", err)
	}
	log.InfoContext(ctx, "extraction done", "outcome", outcome, "covered_seq", res.record.CoveredSeq,
		"revision", res.revision, "duration", time.Since(start))
	w.observe(ctx, start, outcome, res.usage)
	return nil
}

// retryDelay is the Nak delay of a request delivered that many times: 2 s,
// doubling, at most 30 s.
func retryDelay(delivered int) time.Duration { return redelivery.After(delivered) }

var redelivery = retry.Policy{First: 2 * time.Second, Max: 30 * time.Second}

// publish sends a lifecycle notification on RECALL_EVENTS; its key (the
// kind and the request's dedup id) makes a re-sent notification of the same
// request count once.
func (w *Worker) publish(ctx context.Context, kind, typ string, req request, data any) error {
	subject := events.EventsSubject(kind, req.Tenant, req.Session)
	ctx, span := tracer.Start(ctx, "publish "+events.SubjectEventsRoot, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.destination.name", subject)))
	defer span.End()
	return w.events.Publish(ctx, subject, eventpub.Event{Type: typ, Tenant: req.Tenant, Session: req.Session,
		Key: kind + ":" + req.RequestDedupID(), Data: data})
}

// fail publishes extraction.failed, parks the request and removes it from
// the work queue. If parking fails the message is left for redelivery, so a
// request is never lost.
func (w *Worker) fail(ctx context.Context, m *pcgroup.Msg, req request, reason string, cause error, attempts int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p := parked.Parked{
		Request: req.ExtractionRequested, EventID: req.id, Reason: reason, Error: cause.Error(),
		Attempts: attempts, ParkedAt: time.Now().UTC(), Worker: w.cfg.WorkerID, Subject: m.Subject(),
	}
	if req.Tenant == "" || req.Session == "" {
		p.Raw = m.Data()
	}
	if meta, err := m.Metadata(); err == nil {
		p.StreamSeq = meta.Sequence.Stream
	}
	if err := parked.Put(ctx, w.parked, &p); err != nil {
		w.log.ErrorContext(ctx, "parking failed request; leaving it in the queue", "err", err)
		_ = m.Nak(retryDelay(attempts))
		return
	}
	if req.Tenant != "" && req.Session != "" {
		f := events.ExtractionFailed{Tenant: req.Tenant, Session: req.Session, UpToSeq: req.UpToSeq, Reason: reason,
			Error: cause.Error(), Attempts: attempts, Parked: true, Worker: w.cfg.WorkerID}
		if err := w.publish(ctx, events.KindExtractionFailed, events.TypeExtractionFailed, req, f); err != nil {
			w.log.WarnContext(ctx, "publishing extraction.failed", "err", err)
		}
	}
	// Parked: remove it from the work queue (an ack deletes it there).
	if err := m.Ack(ctx); err != nil {
		w.log.WarnContext(ctx, "removing parked request from the queue", "err", err)
	}
}
