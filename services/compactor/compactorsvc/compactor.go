package compactorsvc

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

var (
	tracer = otel.Tracer("recall/compactor")
	meter  = otel.Meter("recall/compactor")

	durationHist, _ = meter.Float64Histogram("recall_compaction_duration_seconds",
		metric.WithDescription("time to answer a compaction request, waiting included, by outcome"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120))
)

// summaryNamespace derives deterministic summary-message uuids.
var summaryNamespace = uuid.MustParse("5c1d3f0e-7a55-4e0b-9a52-2f6e1a7c0b11")

// Component names the compactor in the events it produces (source
// "/recall/compactor").
const Component = "compactor"

// Compactor computes compactions. It is safe for concurrent use.
type Compactor struct {
	cfg      Config
	js       jetstream.JetStream
	events   *eventpub.Publisher
	reader   *transcript.Reader
	memory   jetstream.KeyValue
	status   jetstream.KeyValue
	tenants  *tenantcfg.Store
	provider llm.Provider
	breaker  *breaker
	tails    *tailCache
	log      *slog.Logger
}

// New opens the buckets the compactor reads, retrying (provision.Startup)
// until ctx ends, so a degraded cluster delays the start instead of ending
// it. tenants may be nil (every gate at its default); provider nil disables
// full compaction.
func New(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg Config, tenants *tenantcfg.Store, provider llm.Provider, log *slog.Logger) (*Compactor, error) {
	cfg = cfg.withDefaults()
	var mem, st jetstream.KeyValue
	err := provision.Startup.Do(ctx, log, "opening the compactor's buckets", func(ctx context.Context) error {
		var err error
		if mem, err = js.KeyValue(ctx, events.BucketMemory); err != nil {
			return fmt.Errorf("opening %s: %w", events.BucketMemory, err)
		}
		if st, err = js.KeyValue(ctx, events.BucketStatus); err != nil {
			return fmt.Errorf("opening %s: %w", events.BucketStatus, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !cfg.FullCompact {
		provider = nil
	}
	return &Compactor{cfg: cfg, js: js, events: eventpub.New(js, Component), reader: transcript.NewReader(nc, cfg.Layout()), memory: mem, status: st, tenants: tenants,
		provider: provider, breaker: newBreaker(cfg.BreakerFailures), tails: newTailCache(cfg.TailCacheBytes), log: log}, nil
}

// transcriptRef tells the model where the session's full transcript is:
// its subject in its shard stream.
func (c *Compactor) transcriptRef(tenant, session string) string {
	return "transcript " + c.reader.Layout().Subject(tenant, session)
}

// settings are one request's effective parameters.
type settings struct {
	trigger   string
	threshold int64
	wait      time.Duration
	stale     time.Duration
	window    memory.WindowConfig
	context   int64
	edits     *events.ContextManagement // the request's context editing
}

func (c *Compactor) settings(r events.CompactRequest) settings {
	s := settings{trigger: r.Trigger, wait: c.cfg.WaitTimeout, stale: c.cfg.StaleThreshold, context: r.ContextTokens, edits: r.ContextManagement}
	if s.trigger == "" {
		s.trigger = events.TriggerAuto
	}
	s.threshold = r.AutoCompactThreshold
	if s.threshold <= 0 {
		window, out := c.cfg.ContextWindow, c.cfg.MaxOutputTokens
		if r.ContextWindow > 0 {
			window = r.ContextWindow
			out = r.MaxOutputTokens // the platform's model; 0 = reference reserve
		}
		s.threshold = memory.AutoCompactThreshold(window, out)
	}
	if r.WaitTimeoutMS != nil {
		s.wait = time.Duration(*r.WaitTimeoutMS) * time.Millisecond
	}
	if r.Preview {
		s.wait = 0
	}
	if r.StaleMS > 0 {
		s.stale = time.Duration(r.StaleMS) * time.Millisecond
	}
	s.window = memory.WindowConfig{MinTokens: c.cfg.KeepMinTokens, MinTextMessages: c.cfg.KeepMinTextMessages, MaxTokens: c.cfg.KeepMaxTokens}
	if r.MinTokens > 0 {
		s.window.MinTokens = r.MinTokens
	}
	if r.MinTextMessages > 0 {
		s.window.MinTextMessages = r.MinTextMessages
	}
	if r.MaxTokens > 0 {
		s.window.MaxTokens = r.MaxTokens
	}
	return s
}

// Compact answers one compaction request. It never fails: problems are
// reported as outcomes with a reason. It calls an LLM only for the
// full-compaction fallback.
func (c *Compactor) Compact(ctx context.Context, tenant, session string, r events.CompactRequest) *events.CompactReply {
	start := time.Now()
	ctx, span := tracer.Start(ctx, "compact", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("recall.tenant", tenant), attribute.String("recall.session", session)),
		trace.WithAttributes(telemetry.MemoryOp(telemetry.OpSearchMemory, events.BucketMemory, session)...))
	defer span.End()

	s := c.settings(r)
	var kept []*events.Message // the kept records' messages, as served
	reply := c.compact(ctx, tenant, session, s, &kept)
	if !reply.Served && !r.Preview {
		reply = c.fallback(ctx, tenant, session, s, reply, &kept)
	}
	c.checkServed(ctx, tenant, session, reply, kept)
	reply.DurationUS = time.Since(start).Microseconds()

	span.SetAttributes(telemetry.GenAIConversationCompacted.Bool(reply.Served), attribute.String("recall.outcome", reply.Outcome), attribute.Int("recall.kept", reply.KeptCount),
		attribute.Int64("recall.tokens_before", reply.TokensBefore), attribute.Int64("recall.tokens_after", reply.TokensAfter),
		attribute.Int64("recall.waited_ms", reply.WaitedMS))
	if reply.Outcome == memory.OutcomeError {
		span.SetStatus(codes.Error, reply.Reason)
	}
	durationHist.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("outcome", reply.Outcome)))
	c.log.InfoContext(ctx, "compaction", "tenant", tenant, "session", session, "outcome", reply.Outcome,
		"kept", reply.KeptCount, "tokens_before", reply.TokensBefore, "tokens_after", reply.TokensAfter,
		"waited_ms", reply.WaitedMS, "duration_us", reply.DurationUS, "reason", reply.Reason)
	return reply
}

// compact is the session-memory path; a served reply's kept messages are
// set in *keptMsgs.
func (c *Compactor) compact(ctx context.Context, tenant, session string, s settings, keptMsgs *[]*events.Message) *events.CompactReply {
	reply := &events.CompactReply{Threshold: s.threshold}
	tc := c.tenants.Get(tenant)
	if !tenantcfg.Bool(tc.SMCompact, true) {
		reply.Outcome = memory.OutcomeDisabled
		reply.Reason = "compaction from session memory is turned off for this tenant (sm_compact)"
		return reply
	}
	key := events.MemoryKey(tenant, session)
	reply.WaitedMS = c.waitForExtraction(ctx, key, s.wait, s.stale).Milliseconds()

	rec, rev, err := c.readMemory(ctx, tenant, session)
	if err != nil {
		return errorReply(reply, err)
	}
	in := memory.CompactInput{
		Template:        tc.Template,
		Window:          s.window,
		Threshold:       s.threshold,
		SectionMaxChars: c.cfg.SectionMaxChars,
		ContextTokens:   s.context,
		NotesRef:        "memory " + key,
		TranscriptRef:   c.transcriptRef(tenant, session),
	}
	if rec != nil {
		in.HasMemory, in.Notes, in.LastSummarizedID, in.Trail = true, rec.Notes, rec.LastSummarizedID, rec.Trail
		reply.LastSummarizedID, reply.LastSummarizedSeq, reply.MemoryRevision = rec.LastSummarizedID, rec.LastSummarizedSeq, rev
	}
	var recs []transcript.Record
	var plan memory.CompactPlan
	if rec == nil || memory.IsEmptyTemplate(rec.Notes, orDefault(tc.Template)) {
		plan = memory.PlanCompaction(in)
	} else {
		plan, recs, err = c.planWithTranscript(ctx, tenant, session, rec, in)
		if err != nil {
			return errorReply(reply, err)
		}
	}
	reply.Outcome, reply.Reason = plan.Outcome, plan.Reason
	reply.TokensBefore, reply.TokensAfter, reply.Truncated = plan.TokensBefore, plan.TokensAfter, plan.Truncated
	reply.Served = memory.Served(plan.Outcome)
	if len(recs) > 0 {
		reply.LastSeq = recs[len(recs)-1].Seq
		if plan.Window.Floor >= 0 {
			reply.FloorSeq = recs[plan.Window.Floor].Seq
		}
	}
	if !reply.Served {
		return reply
	}
	kept := make([]transcript.Record, 0, len(plan.Window.Kept))
	for _, i := range plan.Window.Kept {
		kept = append(kept, recs[i])
	}
	anchor := uuid.NewSHA1(summaryNamespace, fmt.Appendf(nil, "%s/%s/%d/%d/%d", tenant, session, rev, reply.LastSeq, s.threshold)).String()
	*keptMsgs = fillServed(reply, s.trigger, anchor, plan.Summary, kept)
	if err := c.editKept(ctx, tenant, s.edits, reply, plan, recs, *keptMsgs); err != nil {
		return errorReply(reply, err)
	}
	return reply
}

// fillServed sets the boundary, summary message and kept records of a
// served reply, and returns the kept records' messages.
func fillServed(reply *events.CompactReply, trigger, anchor, summary string, kept []transcript.Record) []*events.Message {
	reply.Boundary = &events.CompactBoundary{Type: events.BoundaryType, Subtype: events.BoundarySubtype, Trigger: trigger, PreTokens: reply.TokensBefore}
	reply.Summary = &events.SummaryMessage{
		Message:          events.Message{UUID: anchor, Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: summary}}},
		IsCompactSummary: true,
	}
	reply.Kept = make([]event.Event, 0, len(kept))
	msgs := make([]*events.Message, 0, len(kept))
	for _, r := range kept {
		e := r.Event.Clone()
		e.SetExtension(events.ExtSeq, strconv.FormatUint(r.Seq, 10))
		reply.Kept = append(reply.Kept, e)
		msgs = append(msgs, r.Message)
	}
	reply.KeptCount = len(reply.Kept)
	if len(kept) > 0 {
		reply.FirstKeptSeq = kept[0].Seq
		reply.Boundary.PreservedSegment = &events.PreservedSegment{
			HeadUUID:   kept[0].Message.UUID,
			AnchorUUID: anchor,
			TailUUID:   kept[len(kept)-1].Message.UUID,
		}
	}
	return msgs
}

func errorReply(reply *events.CompactReply, err error) *events.CompactReply {
	reply.Outcome, reply.Served, reply.Reason = memory.OutcomeError, false, err.Error()
	return reply
}

func orDefault(template string) string {
	if template == "" {
		return memory.DefaultTemplate
	}
	return template
}

// readMemory returns the session's memory record and revision; nil when
// there is none.
func (c *Compactor) readMemory(ctx context.Context, tenant, session string) (*events.MemoryRecord, uint64, error) {
	rec, rev, err := store.NewMemory(c.memory).Get(ctx, tenant, session)
	if err != nil || rev == 0 {
		return nil, 0, err
	}
	return &rec, rev, nil
}

// Announce publishes compaction.served on RECALL_EVENTS (errors are logged:
// the reply was already sent).
func (c *Compactor) Announce(ctx context.Context, tenant, session string, reply *events.CompactReply) {
	served := events.CompactionServed{
		Tenant: tenant, Session: session, Outcome: reply.Outcome, KeptMessages: reply.KeptCount,
		TokensBefore: reply.TokensBefore, TokensAfter: reply.TokensAfter, WaitedMS: reply.WaitedMS,
		DurationUS: reply.DurationUS,
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.events.Publish(pctx, events.EventsSubject(events.KindCompactionServed, tenant, session),
		eventpub.Event{Type: events.TypeCompactionServed, Tenant: tenant, Session: session, Data: served}); err != nil {
		c.log.WarnContext(ctx, "publishing compaction.served", "tenant", tenant, "session", session, "err", err)
	}
}
