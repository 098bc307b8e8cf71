package extractorsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
)

// Component names the extractor in the events it produces (source
// "/recall/extractor").
const Component = "extractor"

// Outcomes of one request (metric label "outcome").
const (
	OutcomeCompleted = "completed" // the notes were committed
	OutcomeSkipped   = "skipped"   // already covered: no LLM call
	OutcomeConflict  = "conflict"  // the fenced commit lost: result discarded
	OutcomeFailed    = "failed"    // parked
	OutcomeRetry     = "retry"     // infrastructure error: redelivered later
)

// Park reasons (ExtractionFailed.Reason, Parked.Reason).
const (
	ReasonNoValidToolCall = "no_valid_tool_call"
	ReasonProvider        = "provider_unavailable"
	ReasonLLM             = "llm_error"
	ReasonInvalidRequest  = "invalid_request"
	ReasonInfrastructure  = "infrastructure"
)

// errConflict: the memory changed since it was read (another, late worker
// committed first).
var errConflict = errors.New("memory revision changed during the extraction")

// errNotVisible: the transcript records the request covers are not readable
// yet (a lagging replica); the request is retried.
var errNotVisible = errors.New("transcript not visible yet")

// Worker is one extractor: a member of the partitioned consumer group on
// RECALL_EXTRACT that runs extractions for the sessions of the partitions it
// owns. Several workers may share one process (tests, benchmarks).
type Worker struct {
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	events   *eventpub.Publisher
	provider llm.Provider
	log      *slog.Logger
	group    *pcgroup.Group
	reader   *transcript.Reader

	memory  jetstream.KeyValue
	status  jetstream.KeyValue
	parked  jetstream.KeyValue
	stream  jetstream.Stream
	tenants *tenantcfg.Store
	known   knownRevs   // last memory revision per session (readFresh)
	opened  atomic.Bool // the buckets and the tenant configuration are open

	// extract is extraction.Run; tests may replace it.
	extract func(context.Context, llm.Provider, extraction.Input) (*extraction.Output, error)
}

// NewWorker returns a worker that uses nc (which it does not close) and p.
// The streams and buckets must exist (provision.Ensure).
func NewWorker(nc *nats.Conn, cfg Config, p llm.Provider, log *slog.Logger) (*Worker, error) {
	if p == nil {
		return nil, errors.New("extractor: no LLM provider")
	}
	cfg = cfg.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	w := &Worker{cfg: cfg, nc: nc, js: js, events: eventpub.New(js, Component), provider: p, log: log.With("worker", cfg.WorkerID),
		reader: transcript.NewReader(nc), extract: extraction.Run}
	w.group, err = pcgroup.New(js, pcgroup.Config{
		Stream:        events.StreamExtract,
		Partitions:    cfg.Partitions,
		Filter:        events.ExtractPartitionFilter,
		Durable:       events.ExtractDurable,
		PriorityGroup: events.PriorityGroupExtract,
		Bucket:        events.BucketWorkers,
		Member:        cfg.WorkerID,
		HeartbeatTTL:  cfg.HeartbeatTTL,
		AckWait:       cfg.AckWait,
		PinnedTTL:     cfg.PinnedTTL,
		FetchWait:     cfg.FetchWait,
		DrainTimeout:  cfg.DrainTimeout,
		Concurrency:   cfg.Concurrency,
		// Several sessions of one partition at once, one request of a
		// session at a time and in order.
		KeyOf:    sessionKey,
		InFlight: 2 * cfg.Concurrency, // the next requests are fetched while the slots are busy
		// Requests waiting for a slot are offered to idle workers (the
		// owner keeps the session's order and settles the request).
		Share: shareSubject(cfg),
		Log:   w.log,
	}, w.handle)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// shareSubject is the work-sharing subject ("" when sharing is off).
func shareSubject(cfg Config) string {
	if cfg.ShareOff {
		return ""
	}
	return events.SubjectExtractShare
}

// sessionKey is the session part (<tenant>.<session>) of a partitioned
// request subject recall.extractp.<p>.<tenant>.<session>.
func sessionKey(subject string) string {
	rest := strings.TrimPrefix(subject, events.SubjectExtractPartitioned+".")
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		return rest[i+1:]
	}
	return subject
}

// ServeSharing adds the work-sharing endpoints to svc (the worker's micro
// service): other workers' offers and the results of this worker's. Without
// it (or with ShareOff) the worker runs only its own partitions' requests.
// Call it before Run.
func (w *Worker) ServeSharing(svc micro.Service) error {
	if w.cfg.ShareOff {
		return nil
	}
	return w.group.AddShareEndpoints(svc)
}

// ID is the worker's member id.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// Group is the worker's consumer-group membership (partitions owned, live
// members).
func (w *Worker) Group() *pcgroup.Group { return w.group }

// Run serves until ctx is done, then hands its partitions over (in-flight
// extractions finish for up to DrainTimeout) and returns nil. Opening the
// buckets, the tenant-config watch and joining the group are retried with
// provision.Retry until they succeed or ctx is done, so Run never returns
// because the cluster is degraded; it returns ctx.Err() when stopped before
// it joined.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.open(ctx); err != nil {
		return err
	}
	unregister := registerWorker(w)
	defer unregister()
	// The attempt runs with ctx itself: it lasts as long as the worker
	// serves, and returns early only when it cannot join.
	return provision.Retry(ctx, w.log, "joining the extraction group", func(context.Context) error {
		return w.group.Run(ctx)
	})
}

// open opens the buckets, the stream and the tenant configuration, each
// retried until it succeeds or ctx is done.
func (w *Worker) open(ctx context.Context) error {
	kvs := []struct {
		name string
		dst  *jetstream.KeyValue
	}{{events.BucketMemory, &w.memory}, {events.BucketStatus, &w.status}, {events.BucketParked, &w.parked}}
	for _, b := range kvs {
		err := provision.Retry(ctx, w.log, "opening "+b.name, func(ctx context.Context) (err error) {
			*b.dst, err = w.js.KeyValue(ctx, b.name)
			return err
		})
		if err != nil {
			return err
		}
	}
	err := provision.Retry(ctx, w.log, "opening "+events.StreamExtract, func(ctx context.Context) (err error) {
		w.stream, err = w.js.Stream(ctx, events.StreamExtract)
		return err
	})
	if err != nil {
		return err
	}
	if w.tenants, err = tenantcfg.Watch(ctx, w.js, w.log); err != nil {
		return err
	}
	w.opened.Store(true)
	return nil
}

// Ready reports why the worker is not serving yet (or nil): it is ready
// once its buckets are open and it has joined the group (it sees itself
// among the members, so it consumes the partitions assigned to it).
func (w *Worker) Ready() error {
	if !w.opened.Load() {
		return errors.New("opening buckets and tenant configuration")
	}
	if !slices.Contains(w.group.Members(), w.cfg.WorkerID) {
		return errors.New("joining the extraction group")
	}
	return nil
}

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

func retryDelay(delivered int) time.Duration {
	d := time.Second << min(delivered, 5)
	return min(d, 30*time.Second)
}

// result is the outcome of run.
type result struct {
	outcome  string
	reason   string // for OutcomeFailed
	attempts int    // for OutcomeFailed
	record   events.MemoryRecord
	revision uint64
	usage    events.TokenUsage
	provider string
	model    string
	edits    int       // edits applied
	upToDate bool      // the model found nothing to change
	readAt   time.Time // when the memory was read (set on a fenced commit's conflict)
}

// run reads the memory, skips covered requests, extends the request to the
// newest pending one of the session, runs the forked edit and commits it
// with a compare-and-set on the revision read first. A backlog larger than
// the conversation cap is summarized in parts, each committed (extractPart).
func (w *Worker) run(ctx context.Context, m *pcgroup.Msg, req request, log *slog.Logger) (result, error) {
	readAt := time.Now()
	mem, rev, err := w.readMemory(ctx, req.Tenant, req.Session)
	if err != nil {
		return result{}, err
	}
	if req.UpToSeq <= mem.CoveredSeq {
		return result{outcome: OutcomeSkipped, record: mem, revision: rev}, nil
	}
	target := req.UpToSeq
	if newest, ok := w.newestPending(ctx, m); ok && newest > target {
		log.DebugContext(ctx, "covering newer pending requests too", "up_to_seq", newest)
		target = newest
	}
	key := events.MemoryKey(req.Tenant, req.Session)
	stop := w.markRunning(ctx, key, events.StatusRecord{Running: true, Since: time.Now().UTC(), Worker: w.cfg.WorkerID, UpToSeq: target})
	defer stop()

	var usage events.TokenUsage
	edits := 0
	for {
		res, err := w.extractPart(ctx, req, mem, rev, target)
		usage, edits = usage.Add(res.usage), edits+res.edits
		res.usage, res.edits = usage, edits
		if err != nil {
			res.readAt = readAt
			return res, err
		}
		if res.record.CoveredSeq >= target {
			return res, nil
		}
		log.InfoContext(ctx, "summarizing a backlog in parts", "covered_seq", res.record.CoveredSeq, "up_to_seq", target)
		mem, rev, readAt = res.record, res.revision, time.Now()
	}
}

// extractPart runs the forked edit on the session from mem's read window up
// to target, or up to a safe point inside the backlog when the messages
// after the last summarized one are over the conversation cap (partEnd),
// and commits it; the part's coverage is always beyond mem's.
func (w *Worker) extractPart(ctx context.Context, req request, mem events.MemoryRecord, rev, target uint64) (result, error) {
	budget := w.cfg.MaxConversationTokens
	msgs, seqs, more, err := w.readConversation(ctx, req, mem, target, budget)
	if err != nil {
		return result{}, err
	}
	end := partEnd(msgs, seqs, mem, budget)
	if more && end == len(msgs)-1 {
		// No safe point within the cap: read on to the first one after it
		// (the whole backlog when there is none).
		if msgs, seqs, _, err = w.readConversation(ctx, req, mem, target, 0); err != nil {
			return result{}, err
		}
		end = partEnd(msgs, seqs, mem, budget)
	}
	if end < len(msgs)-1 || more {
		msgs, seqs, target = msgs[:end+1], seqs[:end+1], seqs[end]
	}
	in, contextSeq := w.extractionInput(req, mem, msgs, seqs)
	notes := in.Notes
	out, err := w.extract(ctx, w.provider, in)
	var res result
	switch {
	case err == nil:
		res.usage, res.provider, res.model = out.Usage, out.Provider, out.Model
		res.edits, res.upToDate = out.EditsApplied, out.UpToDate
		notes = out.Notes
	case errors.Is(err, extraction.ErrNoMessages):
		// Nothing to summarize (only lifecycle or subagent records): the
		// range is covered all the same; the notes stay as they were.
		notes = mem.Notes
	case ctx.Err() != nil:
		return result{}, ctx.Err()
	default:
		return w.failure(out, err), err
	}

	next := mem
	next.Notes = notes
	if sp := memory.SafePoint(msgs); sp >= 0 && seqs[sp] > mem.LastSummarizedSeq {
		next.LastSummarizedID, next.LastSummarizedSeq = msgs[sp].UUID, seqs[sp]
	}
	next.CoveredSeq = max(mem.CoveredSeq, target)
	next.ContextSeq, next.ContextTokens = contextSeq, w.cfg.MaxConversationTokens
	next.Usage = mem.Usage.Add(res.usage)
	if err == nil {
		next.Extractions++
		next.Provider, next.Model = res.provider, res.model
	}
	next.UpdatedAt = time.Now().UTC()
	newRev, err := w.commit(ctx, req.Tenant, req.Session, next, rev)
	if err != nil {
		return res, err
	}
	res.outcome, res.record, res.revision = OutcomeCompleted, next, newRev
	return res, nil
}

// partEnd is the index of the newest of msgs one extraction covers: the
// last, unless the messages after the last summarized one are estimated
// over maxTokens (a backlog: memory turned on late, failures, an import);
// then the newest safe point (memory.SafePoints) within their first
// maxTokens/2, or failing that the oldest one after it, beyond mem's
// coverage and before the last message (whose point is not final while
// more follows). The rest is summarized in the next parts, so no single
// call is sent a conversation the model rejects as too long, and the notes
// grow in order.
func partEnd(msgs []events.Message, seqs []uint64, mem events.MemoryRecord, maxTokens int64) int {
	last := len(msgs) - 1
	if maxTokens <= 0 || last < 0 {
		return last
	}
	first := summarizedUpTo(seqs, mem)
	var total int64
	for i := first; i <= last; i++ {
		total += memory.EstimateMessage(&msgs[i])
	}
	if total <= maxTokens {
		return last
	}
	k, part := first, int64(0)
	for ; k < last; k++ {
		if part += memory.EstimateMessage(&msgs[k]); part > maxTokens/2 {
			break
		}
	}
	end := -1
	for sp := range memory.SafePoints(msgs) {
		if sp == last || (end >= 0 && sp > k) {
			break
		}
		if sp < first || seqs[sp] <= mem.CoveredSeq {
			continue
		}
		end = sp
		if sp > k {
			break // none within the half-cap: the oldest one after it
		}
	}
	if end < 0 {
		return last
	}
	return end
}

// windowFrom is the sequence an extraction of the session reads from: its
// window (mem.ContextSeq), unless this worker's conversation cap is larger
// than the one the window was cut under — then the first record.
func (w *Worker) windowFrom(mem events.MemoryRecord) uint64 {
	limit := w.cfg.MaxConversationTokens
	if mem.ContextTokens > 0 && (limit <= 0 || mem.ContextTokens < limit) {
		return 1
	}
	return max(mem.ContextSeq, 1)
}

// summarizedUpTo is how many of seqs (ascending) the notes already cover:
// the index of the first message after the last summarized one.
func summarizedUpTo(seqs []uint64, mem events.MemoryRecord) int {
	n := 0
	for n < len(seqs) && seqs[n] <= mem.LastSummarizedSeq {
		n++
	}
	return n
}

// readConversation reads the session's messages from its read window
// (windowFrom) up to target, with their stream sequences, each block over
// MaxBlockTokens clipped (memory.ClipContent). With budget > 0
// it stops once the messages after the last summarized one are estimated
// over budget (more: a backlog that goes in parts, partEnd). Direct Get
// may lag behind on replicas: coverage of records not seen yet is never
// claimed (errNotVisible).
func (w *Worker) readConversation(ctx context.Context, req request, mem events.MemoryRecord, target uint64, budget int64) (msgs []events.Message, seqs []uint64, more bool, err error) {
	var backlog int64
	last, clipped := uint64(0), 0
	err = w.reader.Scan(ctx, req.Tenant, req.Session, w.windowFrom(mem), target, func(r transcript.Record) bool {
		last = r.Seq
		if r.Message == nil {
			return true
		}
		m := *r.Message
		var cut bool
		if m.Content, cut = memory.ClipContent(m.Content, w.cfg.MaxBlockTokens); cut {
			clipped++
		}
		msgs, seqs = append(msgs, m), append(seqs, r.Seq)
		if r.Seq > mem.LastSummarizedSeq {
			backlog += memory.EstimateMessage(&m)
		}
		more = budget > 0 && backlog > budget && r.Seq < target
		return !more
	})
	if err != nil {
		return nil, nil, false, fmt.Errorf("reading the transcript: %w", err)
	}
	if clipped > 0 {
		w.log.DebugContext(ctx, "messages with blocks over the block limit reach the model clipped",
			"tenant", req.Tenant, "session", req.Session, "messages", clipped, "max_block_tokens", w.cfg.MaxBlockTokens)
	}
	if !more && last < target {
		head, err := w.reader.LastSeq(ctx, req.Tenant, req.Session)
		if err != nil {
			return nil, nil, false, fmt.Errorf("reading the transcript head: %w", err)
		}
		if head < target {
			return nil, nil, false, fmt.Errorf("transcript of %s/%s is visible up to seq %d, the request needs %d: %w", req.Tenant, req.Session, head, target, errNotVisible)
		}
	}
	return msgs, seqs, more, nil
}

// extractionInput is the forked edit's input: the tenant's template and
// prompt, the current notes (the template when empty), and the
// conversation read from windowFrom(mem) (extraction.BuildWindow); and the
// sequence the next extraction can read from.
func (w *Worker) extractionInput(req request, mem events.MemoryRecord, msgs []events.Message, seqs []uint64) (extraction.Input, uint64) {
	lastIdx := summarizedUpTo(seqs, mem) - 1
	tc := w.tenants.Get(req.Tenant)
	template := tc.Template
	if strings.TrimSpace(template) == "" {
		template = memory.DefaultTemplate
	}
	notes := mem.Notes
	if strings.TrimSpace(notes) == "" {
		notes = template
	}
	from := w.windowFrom(mem)
	conv, first := extraction.BuildWindow(msgs, lastIdx, w.cfg.MaxConversationTokens, from > 1)
	contextSeq := from // the window's start stays, or it is the first record (0)
	if from == 1 {
		contextSeq = 0
	}
	if first > 0 {
		contextSeq = seqs[first]
	}
	return extraction.Input{
		Tenant: req.Tenant, Session: req.Session, Notes: notes, Template: template, CustomPrompt: tc.Prompt,
		Conversation: conv, MaxTurns: w.cfg.MaxTurns, MaxTokens: w.cfg.MaxTokens,
	}, contextSeq
}

// failure is the result of an extraction that failed with err: its reason
// and the attempts it made.
func (w *Worker) failure(out *extraction.Output, err error) result {
	res := result{outcome: OutcomeFailed, reason: ReasonLLM, attempts: 1}
	if out != nil {
		res.usage = out.Usage
	}
	switch {
	case errors.Is(err, extraction.ErrNoValidToolCall):
		res.reason, res.attempts = ReasonNoValidToolCall, extraction.DefaultNoToolRetries+1
	case errors.Is(err, llm.ErrRetryable):
		res.reason, res.attempts = ReasonProvider, max(w.cfg.RetryAttempts, 1)
	}
	if ae := (*llm.AttemptsError)(nil); errors.As(err, &ae) {
		res.attempts = ae.Attempts
	}
	return res
}

// readMemory returns the session's memory record and its revision (0 when
// the session has none yet), read from the leader and at least as new as
// the last revision this process knows of (readFresh).
func (w *Worker) readMemory(ctx context.Context, tenant, session string) (events.MemoryRecord, uint64, error) {
	e, err := w.readFresh(ctx, events.MemoryKey(tenant, session))
	return e.record, e.revision, err
}

// ReadMemory returns a session's memory record and its KV revision; a
// session without memory yields a zero record and revision 0.
func ReadMemory(ctx context.Context, kv jetstream.KeyValue, tenant, session string) (events.MemoryRecord, uint64, error) {
	return store.NewMemory(kv).Get(ctx, tenant, session)
}

// commit writes rec if the memory is still at revision rev (0: absent). It
// returns errConflict when another writer got there first.
func (w *Worker) commit(ctx context.Context, tenant, session string, rec events.MemoryRecord, rev uint64) (uint64, error) {
	key := events.MemoryKey(tenant, session)
	ctx, span := tracer.Start(ctx, "memory.commit", trace.WithAttributes(attribute.String("recall.key", key),
		attribute.Int64("recall.revision", int64(rev))))
	defer span.End()
	n, err := store.NewMemory(w.memory).Commit(ctx, tenant, session, rec, rev)
	if errors.Is(err, store.ErrConflict) {
		return 0, fmt.Errorf("%w: %w", errConflict, err)
	}
	if err != nil {
		return 0, err
	}
	w.known.note(key, n)
	return n, nil
}

// newestPending returns the up_to_seq of the newest request of m's session
// still in the work queue (m itself or a later one). Requests of one session
// share a stored subject, so that is the last message on m's subject.
func (w *Worker) newestPending(ctx context.Context, m *pcgroup.Msg) (uint64, bool) {
	raw, err := w.stream.GetLastMsgForSubject(ctx, m.Subject())
	if err != nil {
		return 0, false
	}
	e, err := natsce.Decode(raw.Header, raw.Data)
	if err != nil {
		return 0, false
	}
	var r events.ExtractionRequested
	if json.Unmarshal(e.Data(), &r) != nil {
		return 0, false
	}
	return r.UpToSeq, true
}

// markRunning stores the status record with a TTL of the stale threshold
// and renews it while the extraction runs; the returned stop removes it (if
// it is still ours) and must be called on every exit path.
func (w *Worker) markRunning(ctx context.Context, key string, st events.StatusRecord) (stop func()) {
	body, _ := json.Marshal(st)
	ttl := w.cfg.StaleThreshold
	put := func(ctx context.Context, expect uint64) (uint64, error) {
		return store.PutTTL(ctx, w.js, events.BucketStatus, key, body, ttl, expect)
	}
	rev, err := put(ctx, 0)
	if err != nil {
		w.log.WarnContext(ctx, "writing extraction status", "key", key, "err", err)
	}
	done := make(chan struct{})
	finished := make(chan uint64, 1)
	go func() {
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				finished <- rev
				return
			case <-t.C:
				if rev == 0 {
					continue
				}
				n, err := put(ctx, rev)
				if err != nil {
					if errors.Is(err, store.ErrConflict) {
						rev = 0 // another worker owns the status now
					}
					continue
				}
				rev = n
			}
		}
	}()
	return func() {
		close(done)
		last := <-finished
		if last == 0 {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// Purge only our own revision; the marker itself expires.
		if err := w.status.Purge(dctx, key, jetstream.LastRevision(last), jetstream.PurgeTTL(time.Minute)); err != nil {
			w.log.WarnContext(dctx, "clearing extraction status", "key", key, "err", err)
		}
	}
}

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
