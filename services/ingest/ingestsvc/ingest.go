package ingestsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/pkg/claimcheck"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// Publisher is what ingest needs from JetStream: asynchronous publishing
// with acknowledgement futures.
type Publisher interface {
	PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error)
}

// item is one event of a request, decoded or not.
type item struct {
	ev  event.Event
	id  string // as submitted, for results of undecodable events
	err error  // decode or size error: the event is rejected as is
}

// Ingester validates events and stores each on its session's subject in
// the session's transcript shard stream (events.Layout). It is safe for
// concurrent use.
type Ingester struct {
	js             Publisher
	layout         events.Layout
	claim          *claimChecker // nil: no claim check
	maxEventBytes  int
	publishTimeout time.Duration

	tracer     trace.Tracer
	events     metric.Int64Counter
	rejections metric.Int64Counter
	duration   metric.Float64Histogram
	outcome    map[string]metric.AddOption
	reasons    map[string]metric.AddOption

	// erased, when set, tells the sessions whose events are refused
	// (erased, their tombstone alive) and until when.
	erased func(tenant, session string) (time.Time, bool)

	// afterSubmit, when set, runs between publishing and awaiting the
	// acknowledgements (a test seam to hold requests in flight).
	afterSubmit atomic.Pointer[func()]
}

// NewIngester returns an Ingester publishing through js to the transcript
// shards of layout. Events larger than maxEventBytes are rejected;
// acknowledgements not received within publishTimeout fail the event with
// 503.
func NewIngester(js Publisher, layout events.Layout, maxEventBytes int, publishTimeout time.Duration) *Ingester {
	in := &Ingester{js: js, layout: layout, maxEventBytes: maxEventBytes, publishTimeout: publishTimeout, tracer: otel.Tracer("recall/ingest")}
	m := otel.Meter("recall/ingest")
	in.events, _ = m.Int64Counter("recall_ingest_events", metric.WithDescription("events submitted to ingest, by outcome (accepted, duplicate, rejected, failed)"))
	in.rejections, _ = m.Int64Counter("recall_ingest_rejections", metric.WithDescription("rejected events and requests, by reason"))
	in.duration, _ = m.Float64Histogram("recall_ingest_request_duration", metric.WithUnit("s"),
		metric.WithDescription("ingest request duration until every event is acknowledged, by transport"),
		metric.WithExplicitBucketBoundaries(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
	in.outcome = attrSets("outcome", "accepted", "duplicate", "rejected", "failed")
	in.reasons = attrSets("reason", "invalid", "too_large", "tenant_mismatch", "unavailable",
		"unauthenticated", "unsupported_media_type", "invalid_body", "body_too_large", "batch_too_large",
		"busy", "body_timeout", "erased")
	return in
}

// UseClaimCheck makes in store an event whose transcript record would be
// over inlineBytes by claim check: its body goes to store (the
// events.BucketBlobs Object Store) and the record is a stub naming it.
// Without it such events are published whole (and refused by the server
// when over its max_payload). An event answered as a duplicate stores
// nothing: the object its request stored is removed again, once the
// record JetStream kept was read on records (a connection apart from
// publishing; nil keeps such objects). Call it before in serves requests.
func (in *Ingester) UseClaimCheck(store BlobStore, inlineBytes int, records *nats.Conn, log *slog.Logger) {
	in.claim = &claimChecker{Checker: claimcheck.Checker{Store: store, Inline: inlineBytes, Timeout: in.publishTimeout},
		store: store, records: records, log: log}
}

func attrSets(key string, values ...string) map[string]metric.AddOption {
	out := make(map[string]metric.AddOption, len(values))
	for _, v := range values {
		out[v] = metric.WithAttributeSet(attribute.NewSet(attribute.String(key, v)))
	}
	return out
}

// reject counts a request-level rejection.
func (in *Ingester) reject(ctx context.Context, reason string, n int) {
	opt, ok := in.reasons[reason]
	if !ok {
		opt = metric.WithAttributes(attribute.String("reason", reason))
	}
	in.rejections.Add(ctx, int64(n), opt)
}

// observe records a request's duration.
func (in *Ingester) observe(ctx context.Context, transport string, start time.Time) {
	in.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("transport", transport)))
}

// pending is a request whose valid events are published and whose
// acknowledgements are awaited.
//
// A session's events are stored in request order even when a publication
// fails (a stream leader lost mid-request): the first event of each session
// is published at once, sessions side by side, and each later event of the
// same session only once the previous one is stored. When one is not
// stored, the session's later events in the request are not published
// (503, "not attempted"), so a retry from the failed event stores them in
// order; pipelining them would let a later event land first.
type pending struct {
	in      *Ingester
	results []EventResult
	futures []jetstream.PubAckFuture
	spans   []trace.Span // per-event spans of events that carried their own trace
	started time.Time
	// last is the index of each session's latest event (requests of more
	// than one event); next links an event to the session's following one,
	// which waits in held until its turn.
	last map[string]int
	next map[int]int
	held map[int]*nats.Msg
	// timer bounds the wait for acknowledgements (publishTimeout from the
	// first wait that blocks); expired once it fired.
	timer   *time.Timer
	expired bool
	// blobs are the objects stored for claim-checked events, by index;
	// streams the streams their acknowledgements came from.
	blobs   map[int]claimcheck.Blob
	streams map[int]string
	// stopped holds the sessions (transcript subjects) whose claim check
	// failed: their later events in the request are not attempted.
	stopped map[string]bool
}

// errNotAttempted is the result error of an event not published because
// an earlier event of its session in the same request was not stored.
var errNotAttempted = errors.New("not published: an earlier event of this session in the request was not stored; retry from that event, in order (the ids make the retry safe)")

// enqueue publishes m, event i, or holds it while an earlier event of its
// session in this request is unacknowledged.
func (p *pending) enqueue(i int, m *nats.Msg, id string) {
	p.results[i] = EventResult{Index: i, ID: id, Status: http.StatusAccepted}
	if p.last != nil {
		if prev, ok := p.last[m.Subject]; ok {
			p.next[prev] = i
			p.held[i] = m
			p.last[m.Subject] = i
			return
		}
		p.last[m.Subject] = i
	}
	p.send(i, m)
}

// send publishes event i asynchronously.
func (p *pending) send(i int, m *nats.Msg) {
	f, err := p.in.js.PublishMsgAsync(m)
	if err != nil {
		p.results[i].Status, p.results[i].Error = http.StatusServiceUnavailable, "publishing: "+err.Error()
		return
	}
	p.futures[i] = f
}

// submit validates every item for tenant and publishes the valid ones
// asynchronously, in order. session, when not empty, is the session the
// events must belong to (NATS requests carry it in their subject); an event
// without a subject gets it. An event over the claim check's inline size
// has its body stored first (synchronously, in request order); when that
// fails it is refused with 503 and its session's later events in the
// request are not attempted.
func (in *Ingester) submit(ctx context.Context, tenant, session string, items []item) *pending {
	p := &pending{in: in, results: make([]EventResult, len(items)), futures: make([]jetstream.PubAckFuture, len(items)), started: time.Now()}
	if len(items) > 1 {
		p.last, p.next, p.held = map[string]int{}, map[int]int{}, map[int]*nats.Msg{}
	}
	// The trace context of the request, injected into every event that does
	// not carry its own: computed once per request.
	reqHeader := nats.Header{}
	natsce.Inject(ctx, reqHeader)
	for i := range items {
		s, err := in.validate(tenant, session, &items[i])
		if err != nil {
			p.results[i] = rejection(i, items[i].id, err)
			continue
		}
		if r, gone := in.gone(i, tenant, s); gone {
			p.results[i] = r
			continue
		}
		subject := in.layout.Subject(tenant, s.Session)
		if p.stopped[subject] {
			p.results[i] = EventResult{Index: i, ID: s.Event.ID(), Status: http.StatusServiceUnavailable, Error: errNotAttempted.Error()}
			continue
		}
		m, b, err := in.claim.check(ctx, tenant, s, natsce.NewMsg(subject, &s.Event))
		if b.Name != "" {
			p.blob(i, b)
		}
		if err != nil {
			p.results[i] = claimFailure(i, s.Event.ID(), err)
			if errors.Is(err, claimcheck.ErrNotStored) {
				p.stop(subject)
			}
			continue
		}
		m.Header[jetstream.MsgIDHeader] = []string{events.DedupID(tenant, s.Event.ID())}
		in.traceEvent(ctx, p, i, s, m, reqHeader, len(items))
		p.enqueue(i, m, s.Event.ID())
	}
	if f := in.afterSubmit.Load(); f != nil {
		(*f)()
	}
	return p
}

// gone refuses an event of an erased session with 410 Gone.
func (in *Ingester) gone(i int, tenant string, s *events.Session) (EventResult, bool) {
	if in.erased == nil {
		return EventResult{}, false
	}
	until, gone := in.erased(tenant, s.Session)
	if !gone {
		return EventResult{}, false
	}
	return EventResult{Index: i, ID: s.Event.ID(), Status: http.StatusGone, Field: "subject",
		Error: fmt.Sprintf("session %s was erased; its events are refused until %s", s.Session, until.UTC().Format(time.RFC3339))}, true
}

// validate checks an item for tenant (and session, when not empty) and
// returns the event to store; on error it.id names the event.
func (in *Ingester) validate(tenant, session string, it *item) (*events.Session, error) {
	if it.err != nil {
		return nil, it.err
	}
	it.id = it.ev.ID()
	if session != "" {
		switch it.ev.Subject() {
		case "":
			it.ev.SetSubject(session)
		case session:
		default:
			return nil, &events.FieldError{Field: "subject", Reason: fmt.Sprintf("%q does not match the session %q of the request subject", it.ev.Subject(), session)}
		}
	}
	s, err := events.ValidateIngest(it.ev, tenant)
	if err != nil {
		return nil, err
	}
	if name, ok := events.HasClaimCheckAttribute(&s.Event); ok {
		return nil, &events.FieldError{Field: name, Reason: "set by Recall only (claim check of large events)"}
	}
	if s.Event.DataContentType() == "" {
		s.Event.SetDataContentType(event.ApplicationJSON)
	}
	return s, nil
}

// traceEvent injects the trace context into m: the event's own trace,
// continued in a producer span linked to the request, or the request's.
func (in *Ingester) traceEvent(ctx context.Context, p *pending, i int, s *events.Session, m *nats.Msg, reqHeader nats.Header, n int) {
	tp, _ := s.Event.Extensions()[events.ExtTraceParent].(string)
	if tp == "" {
		for k, v := range reqHeader {
			m.Header[k] = v
		}
		return
	}
	ectx := natsce.ExtractEvent(context.Background(), &s.Event)
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("cloudevents.event_id", s.Event.ID()), attribute.String("recall.session", s.Session))}
	if reqSpan := trace.SpanFromContext(ctx).SpanContext(); reqSpan.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: reqSpan}))
	}
	ectx, span := in.tracer.Start(ectx, "publish "+events.SubjectTranscriptRoot, opts...)
	natsce.Inject(ectx, m.Header)
	if p.spans == nil {
		p.spans = make([]trace.Span, n)
	}
	p.spans[i] = span
}

// stop marks subject's session as stopped for the rest of the request.
func (p *pending) stop(subject string) {
	if p.stopped == nil {
		p.stopped = map[string]bool{}
	}
	p.stopped[subject] = true
}

// errAckTimeout is the result error of an event whose acknowledgement did
// not arrive in time.
var errAckTimeout = errors.New("JetStream did not acknowledge the event in time; retry (the id makes the retry safe)")

// wait waits for every acknowledgement and completes the results,
// publishing each held event once its predecessor is stored. It returns
// when every event is settled or the publish timeout passed; the caller's
// cancellation does not abandon events already published.
func (p *pending) wait(ctx context.Context) []EventResult {
	defer func() {
		if p.timer != nil {
			p.timer.Stop()
		}
	}()
	for i, f := range p.futures {
		r := &p.results[i]
		if f == nil {
			if p.held[i] != nil { // its predecessor was not stored
				r.Status, r.Error = http.StatusServiceUnavailable, errNotAttempted.Error()
			}
			continue
		}
		p.resolve(f, r, i)
		if b, ok := p.blobs[i]; ok && r.Duplicate {
			p.in.claim.dropDuplicate(ctx, p.streams[i], r.Seq, b)
		}
		if j, ok := p.next[i]; ok && r.Accepted() {
			m := p.held[j]
			delete(p.held, j)
			p.send(j, m)
		}
	}
	return p.settle(ctx)
}

// resolve completes r from its acknowledgement, waiting at most until the
// request's publish timeout.
func (p *pending) resolve(f jetstream.PubAckFuture, r *EventResult, i int) {
	select {
	case ack := <-f.Ok():
		p.acked(i, r, ack)
		return
	case err := <-f.Err():
		r.Status, r.Error = http.StatusServiceUnavailable, "storing: "+err.Error()
		return
	default:
	}
	if p.expired { // the request's time is up: what is not in is not waited for
		r.Status, r.Error = http.StatusServiceUnavailable, errAckTimeout.Error()
		return
	}
	if p.timer == nil {
		p.timer = time.NewTimer(p.in.publishTimeout)
	}
	select {
	case ack := <-f.Ok():
		p.acked(i, r, ack)
	case err := <-f.Err():
		r.Status, r.Error = http.StatusServiceUnavailable, "storing: "+err.Error()
	case <-p.timer.C:
		p.expired = true
		r.Status, r.Error = http.StatusServiceUnavailable, errAckTimeout.Error()
	}
}

// acked completes r, event i's result, from its acknowledgement.
func (p *pending) acked(i int, r *EventResult, ack *jetstream.PubAck) {
	r.Seq, r.Duplicate = ack.Sequence, ack.Duplicate
	if _, ok := p.blobs[i]; ok {
		p.streams[i] = ack.Stream
	}
}

// blob records the object stored for event i.
func (p *pending) blob(i int, b claimcheck.Blob) {
	if p.blobs == nil {
		p.blobs, p.streams = map[int]claimcheck.Blob{}, map[int]string{}
	}
	p.blobs[i] = b
}

// settle counts the request's outcomes and ends the events' spans.
func (p *pending) settle(ctx context.Context) []EventResult {
	var accepted, dups, rejected, failed int64
	for i := range p.results {
		r := &p.results[i]
		switch {
		case r.Duplicate:
			dups++
		case r.Accepted():
			accepted++
		case r.Status == http.StatusServiceUnavailable:
			failed++
			p.in.rejections.Add(ctx, 1, p.in.reasons["unavailable"])
		default:
			rejected++
			p.in.rejections.Add(ctx, 1, p.in.reasons[reasonOf(r.Status)])
		}
		if p.spans != nil && p.spans[i] != nil {
			p.spans[i].End()
		}
	}
	p.in.count(ctx, "accepted", accepted)
	p.in.count(ctx, "duplicate", dups)
	p.in.count(ctx, "rejected", rejected)
	p.in.count(ctx, "failed", failed)
	return p.results
}

func (in *Ingester) count(ctx context.Context, outcome string, n int64) {
	if n > 0 {
		in.events.Add(ctx, n, in.outcome[outcome])
	}
}
