package triggersvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
)

var instances atomic.Int64

// Source is the CloudEvents source of the events the trigger publishes.
const Source = "/recall/trigger"

// PriorityGroup is the pinned priority group of the trigger's durable
// consumer: one replica is pinned (active), the others wait (standby).
const PriorityGroup = "recall"

// skewMargin is added to the quiet period before the local clock alone (an
// idle stream) completes a response, to absorb clock skew between this host
// and the NATS server that timestamps records.
const skewMargin = time.Second

// maxChecksPerTick bounds the Direct Get confirmations of quiet responses
// per tick.
const maxChecksPerTick = 256

// Trigger follows RECALL_TRANSCRIPT with the durable consumer
// events.DurableTrigger and publishes extraction requests. Create it with
// New, run it with Run. Its exported methods are safe for concurrent use.
type Trigger struct {
	id      int64
	cfg     Config
	base    memory.Thresholds
	log     *slog.Logger
	nc      *nats.Conn
	js      jetstream.JetStream
	reader  *transcript.Reader
	tenants *tenantcfg.Store
	tracer  trace.Tracer
	m       *metrics

	mu       sync.Mutex
	ctx      context.Context
	cons     jetstream.Consumer
	sessions map[string]*session
	lru      session // sentinel of the LRU ring: lru.next is the most recent
	evicted  map[uint64]struct{}
	// fromStart: no record before next exists, so a session never seen is
	// new and needs no rebuild.
	fromStart bool
	next      uint64     // next stream sequence to process
	holds     []hold     // FIFO by sequence (see hold)
	unacked   []delivery // delivered, not acknowledged, in delivery order
	ackedSeq  uint64
	futures   []jetstream.PubAckFuture
	unflushed int
	maxSeen   int64 // newest stream time processed (Unix ns)
	halted    bool  // a rebuild failed: nothing more is processed or acked
	thCache   map[string]*tenantSettings
	thRev     uint64 // the tenant configuration revision thCache was built from
	buf       []memory.TriggerDecision

	stats struct {
		records, delivered, decisions, gated, rebuilds, redelivered, gapFilled, evictions, takeovers atomic.Int64
		sessions, bytes, lag                                                                         atomic.Int64
	}
}

// session is one session's state in memory, linked into the LRU ring.
type session struct {
	key        string // "<tenant>.<session>"
	tenantLen  int
	st         memory.TriggerState
	prev, next *session
	lastActive int64  // local clock, Unix ns
	trace      string // traceparent of the pending response's last record
	dropped    bool
}

func (s *session) tenant() string  { return s.key[:s.tenantLen] }
func (s *session) session() string { return s.key[s.tenantLen+1:] }

// hold keeps the consumer's ack floor below the last record of a pending
// response until the response is complete, so a restart redelivers it and
// the quiet-period decision cannot be lost. Holds are appended in sequence
// order; one whose session moved on is dead and skipped.
type hold struct {
	s        *session
	seq      uint64
	deadline int64 // stream time of the record + quiet period
}

// delivery is a delivered message not acknowledged yet.
type delivery struct {
	m   jetstream.Msg
	seq uint64
}

func (h *hold) live() bool {
	seq, _, ok := h.s.st.Pending()
	return ok && seq == h.seq && !h.s.dropped
}

type tenantSettings struct {
	th    memory.Thresholds
	gated bool // session_memory off
}

// Stats is a snapshot of the trigger's counters.
type Stats struct {
	Records     int64 // transcript records processed
	Delivered   int64 // messages the consumer delivered to this replica
	Decisions   int64 // extraction requests published (threshold)
	Gated       int64 // decisions not published because session_memory is off
	Rebuilds    int64 // sessions rebuilt from the transcript
	Redelivered int64 // deliveries ignored because already processed
	GapFilled   int64 // records read by Direct Get because the consumer skipped them
	Evictions   int64
	Takeovers   int64 // times another replica's progress was adopted
	Sessions    int64 // sessions in memory
	// BytesPerSession estimates the memory of one session in the cache:
	// the state, the cache entry and the map slot.
	BytesPerSession int64
	Lag             int64 // records pending behind the last delivery
}

// New returns a trigger over nc. tenants may be nil (defaults for every
// tenant). Nothing happens until Run.
func New(nc *nats.Conn, cfg Config, tenants *tenantcfg.Store, log *slog.Logger) (*Trigger, error) {
	cfg = cfg.WithDefaults()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Trigger{
		cfg: cfg, base: cfg.Thresholds(), log: log, nc: nc, js: js,
		reader: transcript.NewReader(nc), tenants: tenants, tracer: otel.Tracer("recall/trigger"),
		sessions: map[string]*session{}, evicted: map[uint64]struct{}{}, thCache: map[string]*tenantSettings{},
	}
	t.lru.next, t.lru.prev = &t.lru, &t.lru
	t.m = newMetrics(t)
	t.id = instances.Add(1)
	return t, nil
}

// ConsumerConfig is the trigger's durable consumer: AckAll (one ack covers
// every record below it), a pinned priority group for active/standby
// replicas, and no InactiveThreshold (a durable must never be reaped).
func (c Config) ConsumerConfig() jetstream.ConsumerConfig {
	c = c.WithDefaults()
	return jetstream.ConsumerConfig{
		Durable:        events.DurableTrigger,
		Description:    "Recall trigger: extraction decisions",
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckAllPolicy,
		AckWait:        c.AckWait,
		MaxAckPending:  c.MaxAckPending,
		MaxDeliver:     -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{PriorityGroup},
		PinnedTTL:      c.PinnedTTL,
	}
}

// Run consumes the transcript until ctx is done, then stops pulling,
// finishes the records already received, waits for its publications, acks,
// and returns nil. The streams must exist (provision.Ensure).
func (t *Trigger) Run(ctx context.Context) error {
	cons, err := t.js.CreateOrUpdateConsumer(ctx, events.StreamTranscript, t.cfg.ConsumerConfig())
	if err != nil {
		return fmt.Errorf("creating consumer %s: %w", events.DurableTrigger, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("reading consumer %s: %w", events.DurableTrigger, err)
	}
	stream, err := t.js.Stream(ctx, events.StreamTranscript)
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", events.StreamTranscript, err)
	}
	t.mu.Lock()
	t.ctx, t.cons = ctx, cons
	t.next = info.AckFloor.Stream + 1
	t.fromStart = stream.CachedInfo().State.FirstSeq >= t.next || stream.CachedInfo().State.Msgs == 0
	// Records delivered to a previous instance but not acknowledged would
	// only be redelivered after AckWait: read them now.
	if last := info.Delivered.Stream; last >= t.next {
		t.fillGap(last + 1)
	}
	t.mu.Unlock()
	t.log.Debug("consuming", "trigger", t.id, "next", t.next, "from_start", t.fromStart)

	cc, err := cons.Consume(t.onMsg,
		jetstream.PullMaxMessages(t.cfg.PullBatch),
		jetstream.PullPriorityGroup(PriorityGroup),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrPinIDMismatch) && !errors.Is(err, nats.ErrTimeout) {
				t.log.Debug("consume", "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", events.DurableTrigger, err)
	}
	tick := t.cfg.ResponseQuietPeriod / 4
	tick = min(max(tick, 20*time.Millisecond), 250*time.Millisecond)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			t.tick()
			t.mu.Lock()
			halted := t.halted
			t.mu.Unlock()
			if halted {
				cc.Stop()
				return errors.New("trigger halted: a session could not be rebuilt from the transcript")
			}
		case <-ctx.Done():
			cc.Drain()
			select {
			case <-cc.Closed():
			case <-time.After(10 * time.Second):
				cc.Stop()
			}
			t.mu.Lock()
			t.ctx = context.Background()
			t.flush()
			t.mu.Unlock()
			// Let a standby take over now rather than after PinnedTTL.
			uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = stream.UnpinConsumer(uctx, events.DurableTrigger, PriorityGroup)
			cancel()
			return nil
		}
	}
}

// Stats returns the current counters.
func (t *Trigger) Stats() Stats {
	s := Stats{
		Records: t.stats.records.Load(), Delivered: t.stats.delivered.Load(), Decisions: t.stats.decisions.Load(), Gated: t.stats.gated.Load(),
		Rebuilds: t.stats.rebuilds.Load(), Redelivered: t.stats.redelivered.Load(), GapFilled: t.stats.gapFilled.Load(),
		Evictions: t.stats.evictions.Load(), Takeovers: t.stats.takeovers.Load(),
		Sessions: t.stats.sessions.Load(), Lag: t.stats.lag.Load(),
	}
	if s.Sessions > 0 {
		s.BytesPerSession = t.stats.bytes.Load() / s.Sessions
	}
	return s
}

// onMsg is the consume callback: records are processed strictly in stream
// order; a skipped range (another replica's unacked deliveries, a lost
// delivery) is read with Direct Get first, and deliveries already processed
// are ignored.
func (t *Trigger) onMsg(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	seq := md.Sequence.Stream
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stats.lag.Store(int64(md.NumPending))
	if t.halted {
		return
	}
	t.stats.delivered.Add(1)
	if seq < t.next {
		t.stats.redelivered.Add(1)
		t.unacked = append(t.unacked, delivery{m, seq})
		return
	}
	if seq > t.next {
		t.fillGap(seq)
		if t.next != seq {
			return // not filled: this delivery is redelivered later
		}
	}
	if t.halted || !t.process(seq, md.Timestamp.UnixNano(), m.Subject(), m.Headers(), m.Data()) {
		return
	}
	t.next = seq + 1
	t.unacked = append(t.unacked, delivery{m, seq})
	t.unflushed++
	if t.unflushed >= t.cfg.AckEvery {
		t.flush()
	}
}

// fillGap processes the records from t.next to upTo-1 that were not
// delivered to this replica. If the consumer's ack floor shows another
// replica processed them, its progress is adopted and every session in
// memory is dropped (it may be stale) to be rebuilt on demand.
func (t *Trigger) fillGap(upTo uint64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 30*time.Second)
	defer cancel()
	if info, err := t.cons.Info(ctx); err == nil && info.AckFloor.Stream+1 > t.next {
		t.stats.takeovers.Add(1)
		t.log.Debug("takeover", "trigger", t.id, "next", t.next, "floor", info.AckFloor.Stream)
		t.dropAll()
		t.next = info.AckFloor.Stream + 1
	}
	if t.next >= upTo {
		return
	}
	err := directRange(ctx, t.nc, "", t.next, upTo-1, func(seq uint64, ts int64, subject string, h nats.Header, data []byte) {
		if t.halted {
			return
		}
		t.stats.gapFilled.Add(1)
		if t.process(seq, ts, subject, h, data) {
			t.next = seq + 1
		}
	})
	if err != nil {
		t.log.Warn("reading skipped transcript records", "from", t.next, "to", upTo-1, "err", err)
		return
	}
	if !t.halted {
		t.next = upTo // what remains of the range was deleted
	}
}

// dropAll forgets every session (they are rebuilt from the transcript).
func (t *Trigger) dropAll() {
	for _, s := range t.sessions {
		s.dropped = true
	}
	t.sessions = map[string]*session{}
	t.lru.next, t.lru.prev = &t.lru, &t.lru
	t.holds = t.holds[:0]
	t.fromStart = false
	clear(t.evicted)
	t.stats.sessions.Store(0)
	t.stats.bytes.Store(0)
}

// process applies one stored record. It returns false, and halts the
// trigger, when the record's session could not be rebuilt: nothing at or
// after seq is processed or acknowledged any more, so a restart redelivers
// it.
func (t *Trigger) process(seq uint64, ts int64, subject string, h nats.Header, data []byte) bool {
	t.stats.records.Add(1)
	t.m.records.Add(t.ctx, 1)
	if ts > t.maxSeen {
		t.maxSeen = ts
	}
	key, ok := strings.CutPrefix(subject, events.SubjectTranscriptRoot+".")
	dot := strings.IndexByte(key, '.')
	if !ok || dot <= 0 {
		return true
	}
	rec, err := decodeRecord(seq, ts, h, data)
	if err != nil {
		t.log.Warn("skipping undecodable transcript record", "seq", seq, "subject", subject, "err", err)
		rec = memory.TriggerRecord{Seq: seq, Kind: memory.RecOther}
	}
	s := t.lookup(key, dot, seq)
	if s == nil {
		t.halted = true
		t.log.Error("halting: a session could not be rebuilt from the transcript; restart the trigger", "seq", seq, "session", key)
		return false
	}
	ts2 := t.settings(s.tenant())
	before := s.st.Size()
	t.buf = s.st.Observe(rec, &ts2.th, t.buf[:0])
	for _, d := range t.buf {
		t.log.Debug("decision", "trigger", t.id, "session", s.key, "seq", seq, "up_to", d.UpToSeq, "counters", d.Counters)
		tp := s.trace
		if d.UpToSeq == seq {
			tp = headerGet(h, "traceparent")
		}
		t.emit(s, d, tp, ts2.gated)
	}
	if pseq, pts, ok := s.st.Pending(); ok && pseq == seq {
		s.trace = headerGet(h, "traceparent")
		t.holds = append(t.holds, hold{s: s, seq: seq, deadline: pts + int64(ts2.th.QuietPeriod)})
	} else if !ok {
		s.trace = ""
	}
	t.stats.bytes.Add(int64(s.st.Size() - before))
	if s.st.Ended() && !ok {
		t.evict(s)
	}
	return true
}

// lookup returns the session of key, rebuilding it from the transcript
// (records before seq) when it is not in memory and may have history.
func (t *Trigger) lookup(key string, dot int, seq uint64) *session {
	now := time.Now().UnixNano()
	if s := t.sessions[key]; s != nil {
		s.lastActive = now
		t.moveFront(s)
		return s
	}
	key = strings.Clone(key)
	s := &session{key: key, tenantLen: dot, lastActive: now}
	h := hashKey(key)
	_, wasEvicted := t.evicted[h]
	if (wasEvicted || !t.fromStart) && seq > 1 {
		if !t.rebuild(s, seq) {
			return nil
		}
		delete(t.evicted, h)
		if pseq, pts, ok := s.st.Pending(); ok {
			// Its last record was acknowledged in an earlier life; this
			// entry only arms the quiet-period timer.
			th := t.settings(s.tenant()).th
			t.holds = append(t.holds, hold{s: s, seq: pseq, deadline: pts + int64(th.QuietPeriod)})
		}
	}
	t.sessions[key] = s
	t.moveFront(s)
	t.stats.sessions.Add(1)
	t.stats.bytes.Add(int64(sessionOverhead + len(key) + s.st.Size()))
	if len(t.sessions) > t.cfg.MaxSessions {
		t.evictLRU()
	}
	return s
}

// sessionOverhead approximates a cache entry beyond the state: the session
// struct without its state, and a map slot (key header, pointer, hash
// bucket share).
const sessionOverhead = int(unsafe.Sizeof(session{})-unsafe.Sizeof(memory.TriggerState{})) + 48

// rebuild replays the session's stored records before seq into s, without
// emitting: their decisions were published before they were acknowledged.
// It retries while the trigger runs and reports whether it succeeded.
func (t *Trigger) rebuild(s *session, seq uint64) bool {
	t.stats.rebuilds.Add(1)
	t.m.rebuilds.Add(t.ctx, 1)
	th := t.settings(s.tenant()).th
	var discard []memory.TriggerDecision
	subject := events.TranscriptSubject(s.tenant(), s.session())
	for attempt := 0; ; attempt++ {
		s.st = memory.TriggerState{}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 10*time.Second)
		err := directRange(ctx, t.nc, subject, 1, seq-1, func(rseq uint64, ts int64, _ string, h nats.Header, data []byte) {
			rec, err := decodeRecord(rseq, ts, h, data)
			if err != nil {
				rec = memory.TriggerRecord{Seq: rseq, Kind: memory.RecOther}
			}
			discard = s.st.Observe(rec, &th, discard[:0])
		})
		cancel()
		if err == nil {
			t.log.Debug("rebuilt", "trigger", t.id, "session", s.key, "before", seq, "last", s.st.LastSeq(), "tokens", s.st.Tokens(), "baseline", s.st.Baseline())
			return true
		}
		t.log.Warn("rebuilding session state", "session", s.key, "attempt", attempt+1, "err", err)
		if t.ctx.Err() != nil || t.nc.IsClosed() || attempt >= 50 {
			return false
		}
		select {
		case <-t.ctx.Done():
			return false
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)):
		}
	}
}

func (t *Trigger) moveFront(s *session) {
	if s.prev != nil {
		s.prev.next, s.next.prev = s.next, s.prev
	}
	s.next, s.prev = t.lru.next, &t.lru
	t.lru.next.prev = s
	t.lru.next = s
}

// evict removes s from memory; its next record rebuilds it.
func (t *Trigger) evict(s *session) {
	if t.sessions[s.key] != s {
		return
	}
	delete(t.sessions, s.key)
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next = nil, nil
	s.dropped = true
	t.evicted[hashKey(s.key)] = struct{}{}
	t.stats.evictions.Add(1)
	t.stats.sessions.Add(-1)
	t.stats.bytes.Add(-int64(sessionOverhead + len(s.key) + s.st.Size()))
}

// evictLRU evicts least recently used sessions without a pending response
// until the cache fits.
func (t *Trigger) evictLRU() {
	for s := t.lru.prev; s != &t.lru && len(t.sessions) > t.cfg.MaxSessions; {
		prev := s.prev
		if _, _, pending := s.st.Pending(); !pending {
			t.evict(s)
		}
		s = prev
	}
}

// settings resolves a tenant's thresholds and gate (cached until the
// tenant configuration changes).
func (t *Trigger) settings(tenant string) *tenantSettings {
	// A configuration change empties the cache before the next record is
	// decided, so new thresholds and gates apply from that record on.
	if t.tenants != nil {
		if rev := t.tenants.Revision(); rev != t.thRev {
			clear(t.thCache)
			t.thRev = rev
		}
	}
	if ts := t.thCache[tenant]; ts != nil {
		return ts
	}
	ts := &tenantSettings{th: t.base, gated: t.cfg.SessionMemoryOff}
	if t.tenants != nil {
		c := t.tenants.Get(tenant)
		ts.th = t.base.Override(c)
		ts.gated = !tenantcfg.Bool(c.SessionMemory, !t.cfg.SessionMemoryOff)
	}
	t.thCache[strings.Clone(tenant)] = ts
	return ts
}

// emit publishes a threshold decision to RECALL_EXTRACT and RECALL_EVENTS.
func (t *Trigger) emit(s *session, d memory.TriggerDecision, traceparent string, gated bool) {
	if gated {
		t.stats.gated.Add(1)
		t.m.decisions.Add(t.ctx, 1, reasonAttr("gated"))
		return
	}
	req := events.ExtractionRequested{
		Tenant: s.tenant(), Session: s.session(), UpToSeq: d.UpToSeq, UpToID: d.UpToID,
		Reason: events.ReasonThreshold, Counters: d.Counters,
	}
	ctx := t.ctx
	if traceparent != "" {
		ctx = natsce.Extract(ctx, nats.Header{"traceparent": []string{traceparent}})
	}
	ctx, span := t.tracer.Start(ctx, "trigger.decision", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("recall.tenant", req.Tenant), attribute.String("recall.session", req.Session),
			attribute.Int64("recall.up_to_seq", int64(req.UpToSeq)), attribute.Int64("recall.tokens", d.Counters.Tokens),
			attribute.Int("recall.tool_calls_since", d.Counters.ToolCallsSince), attribute.Bool("recall.natural_break", d.Counters.NaturalBreak)))
	defer span.End()
	for _, m := range requestMsgs(ctx, req) {
		f, err := t.js.PublishMsgAsync(m)
		if err != nil {
			t.publishSync(m)
			continue
		}
		t.futures = append(t.futures, f)
	}
	t.stats.decisions.Add(1)
	t.m.decisions.Add(t.ctx, 1, reasonAttr(events.ReasonThreshold))
}

// requestMsgs encodes an extraction request as binary-mode CloudEvents for
// RECALL_EXTRACT and RECALL_EVENTS, deduplicated by RequestDedupID.
func requestMsgs(ctx context.Context, req events.ExtractionRequested) [2]*nats.Msg {
	data, _ := json.Marshal(req)
	e := event.New()
	e.SetID(req.RequestDedupID())
	e.SetSource(Source)
	e.SetType(events.TypeExtractionRequested)
	e.SetSubject(req.Session)
	e.SetTime(time.Now())
	e.SetExtension(events.ExtTenant, req.Tenant)
	_ = e.SetData(event.ApplicationJSON, data)
	m1 := natsce.NewMsg(events.ExtractSubject(req.Tenant, req.Session), &e)
	m1.Header.Set(jetstream.MsgIDHeader, req.RequestDedupID())
	natsce.Inject(ctx, m1.Header)
	m2 := natsce.NewMsg(events.EventsSubject(events.KindExtractionRequested, req.Tenant, req.Session), &e)
	for k, v := range m1.Header {
		m2.Header[k] = v
	}
	return [2]*nats.Msg{m1, m2}
}

// publishSync publishes m until JetStream stores it (the dedup id makes
// retries harmless) or the trigger stops.
func (t *Trigger) publishSync(m *nats.Msg) {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := t.js.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return
		}
		if attempt%10 == 0 {
			t.log.Warn("publishing extraction request", "subject", m.Subject, "attempt", attempt+1, "err", err)
		}
		if attempt > 600 {
			t.log.Error("giving up publishing extraction request", "subject", m.Subject, "err", err)
			return
		}
		time.Sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second))
	}
}

// flush waits until every publication is stored, then acknowledges (AckAll)
// the newest delivered record below the oldest live hold.
func (t *Trigger) flush() {
	for _, f := range t.futures {
		select {
		case <-f.Ok():
		case <-f.Err():
			t.publishSync(f.Msg())
		}
	}
	clear(t.futures)
	t.futures = t.futures[:0]
	t.unflushed = 0
	i := 0
	for i < len(t.holds) && !t.holds[i].live() {
		i++
	}
	if i > 0 {
		n := copy(t.holds, t.holds[i:])
		clear(t.holds[n:])
		t.holds = t.holds[:n]
	}
	// Everything below the oldest live hold, and below what was processed,
	// may be acknowledged; one AckAll on the newest such delivery does it.
	limit := t.next
	if len(t.holds) > 0 {
		limit = t.holds[0].seq
	}
	best := -1
	for i, d := range t.unacked {
		if d.seq < limit && (best < 0 || d.seq > t.unacked[best].seq) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	bseq := t.unacked[best].seq
	if bseq > t.ackedSeq {
		if err := t.unacked[best].m.Ack(); err != nil {
			return
		}
		t.ackedSeq = bseq
	}
	keep := t.unacked[:0]
	for _, d := range t.unacked {
		if d.seq > bseq {
			keep = append(keep, d)
		}
	}
	clear(t.unacked[len(keep):])
	t.unacked = keep
}

// tick completes responses whose quiet period passed, evicts idle
// sessions, and acknowledges what was processed.
func (t *Trigger) tick() {
	t.mu.Lock()
	if t.ctx == nil {
		t.mu.Unlock()
		return
	}
	now := time.Now().UnixNano()
	var check []hold
	for i := range t.holds {
		h := &t.holds[i]
		if !h.live() {
			continue
		}
		if h.deadline < t.maxSeen {
			// A newer record was processed: any record of this session
			// within the quiet period would have been processed first.
			t.completeQuiet(h.s)
			continue
		}
		if now > h.deadline+int64(skewMargin) && len(check) < maxChecksPerTick {
			check = append(check, *h)
		}
	}
	t.evictIdle(now)
	t.flush()
	t.mu.Unlock()

	// The stream is idle: confirm with the transcript that no record of the
	// session follows within the quiet period (one may be in flight).
	for _, h := range check {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		recs, err := t.reader.Read(ctx, h.s.tenant(), h.s.session(), h.seq+1, 0, 1)
		cancel()
		if err != nil || (len(recs) > 0 && recs[0].Time.UnixNano() <= h.deadline) {
			continue
		}
		t.mu.Lock()
		if h.live() {
			t.completeQuiet(h.s)
			t.flush()
		}
		t.mu.Unlock()
	}
}

func (t *Trigger) completeQuiet(s *session) {
	ts := t.settings(s.tenant())
	t.buf = s.st.CompleteQuiet(&ts.th, t.buf[:0])
	for _, d := range t.buf {
		t.emit(s, d, s.trace, ts.gated)
	}
	s.trace = ""
}

// evictIdle evicts sessions idle for SessionIdle (without a pending
// response), oldest first.
func (t *Trigger) evictIdle(now int64) {
	limit := now - int64(t.cfg.SessionIdle)
	for s := t.lru.prev; s != &t.lru && s.lastActive < limit; {
		prev := s.prev
		if _, _, pending := s.st.Pending(); !pending {
			t.evict(s)
		}
		s = prev
	}
}

// recordOf reduces a transcript record read by Direct Get.
func recordOf(r *transcript.Record) memory.TriggerRecord {
	ts := r.Time.UnixNano()
	if r.Time.IsZero() {
		ts = 0
	}
	switch {
	case r.Message != nil:
		return memory.MessageRecord(r.Seq, ts, r.Message)
	case r.Compacting != nil:
		return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecCompacting}
	case r.Compacted != nil:
		return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecCompacted, PostTokens: r.Compacted.PostTokens}
	case r.Ended != nil:
		return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecEnded}
	}
	return memory.TriggerRecord{Seq: r.Seq, Time: ts, Kind: memory.RecOther}
}

// decodeRecord reduces a stored message to a TriggerRecord, reading the
// type from the ce-type header before touching the body.
func decodeRecord(seq uint64, ts int64, h nats.Header, data []byte) (memory.TriggerRecord, error) {
	typ := headerGet(h, "ce-type")
	if typ == "" { // structured mode
		r, err := transcript.Decode(h, data)
		if err != nil {
			return memory.TriggerRecord{}, err
		}
		r.Seq = seq
		rec := recordOf(&r)
		rec.Time = ts
		return rec, nil
	}
	switch typ {
	case events.TypeMessage:
		rec, err := memory.DecodeTriggerMessage(seq, ts, data)
		if err != nil {
			return memory.TriggerRecord{}, fmt.Errorf("decoding message: %w", err)
		}
		return rec, nil
	case events.TypeSessionCompacting:
		return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecCompacting}, nil
	case events.TypeSessionCompacted:
		var c events.SessionCompacted
		if err := json.Unmarshal(data, &c); err != nil {
			return memory.TriggerRecord{}, fmt.Errorf("decoding compacted: %w", err)
		}
		return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecCompacted, PostTokens: c.PostTokens}, nil
	case events.TypeSessionEnded:
		return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecEnded}, nil
	}
	return memory.TriggerRecord{Seq: seq, Time: ts, Kind: memory.RecOther}, nil
}

// headerGet is a case-insensitive header lookup that tries the common
// spellings before scanning.
func headerGet(h nats.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// hashKey is FNV-1a 64 of a session key (for the evicted set).
func hashKey(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
