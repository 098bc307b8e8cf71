package triggersvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// shutdownFlush bounds the last wait for publications when a lane stops;
// what is not confirmed by then is not acknowledged (and is redelivered).
const shutdownFlush = 5 * time.Second

// lane follows one consumer (the trigger's durable on one transcript
// shard) strictly in stream order. One goroutine owns all of its
// state, so there is no lock and network calls never hold one: when a
// publication, a rebuild or a read fails, the lane retries with its
// context and takes no new record meanwhile (the consumer stops
// delivering once its buffer is full).
type lane struct {
	deps    *laneDeps
	log     *slog.Logger
	cons    jetstream.Consumer
	stream  string // the stream cons reads (gaps are read from it by Direct Get)
	filter  string // subject filter of cons for Direct Get ("" = every subject)
	durable string
	// shard is the transcript shard the lane follows.
	shard int

	cache    *sessionCache
	led      ledger
	em       emitter
	next     uint64 // first stream sequence not processed
	lastDseq uint64 // newest delivery (consumer) sequence seen
	maxSeen  int64  // newest stream time processed (Unix ns)
	buf      []memory.TriggerDecision
	thCache  map[string]*tenantSettings
	thRev    uint64 // the tenant configuration revision thCache was built from
	lag      atomic.Int64
	// failed: a decision could not be published (the lane is stopping);
	// from then on nothing is acknowledged.
	failed bool
}

// laneDeps is what a lane uses of its trigger: the configuration, the
// connection and the readers, the tenant settings, the snapshot store and
// the counters and instruments every lane adds to. The trigger builds it
// once (New) and its lanes share it: its fields are not changed after New,
// and what lanes change through it (counters, the snapshot store,
// consuming) is safe for concurrent use.
type laneDeps struct {
	id      int64 // the trigger's instance number (logs)
	cfg     Config
	layout  events.Layout     // the transcript's shards
	base    memory.Thresholds // cfg's thresholds, before tenant overrides
	nc      *nats.Conn
	js      jetstream.JetStream
	reader  *transcript.Reader // stubs unresolved: the trigger reads record metadata only
	tenants *tenantcfg.Store   // nil: every tenant has the base thresholds
	tracer  trace.Tracer
	m       *metrics
	stats   counters
	snaps   *snapshotStore
	// consuming is set once a lane positioned itself on its consumer.
	consuming atomic.Bool
}

type tenantSettings struct {
	th    memory.Thresholds
	gated bool // session_memory off
}

func (t *Trigger) newLane(cons jetstream.Consumer, stream, filter, durable string, maxSessions int) *lane {
	return &lane{
		deps: &t.laneDeps, log: t.log.With("durable", durable), cons: cons, stream: stream, filter: filter, durable: durable,
		cache: newSessionCache(maxSessions, &t.stats), em: emitter{js: t.js, log: t.log, epoch: 1},
		thCache: map[string]*tenantSettings{},
	}
}

// run consumes until ctx is done (then it returns nil) or the consumer
// fails for good. On return nothing is acknowledged past a publication that
// was not confirmed.
func (l *lane) run(ctx context.Context) error {
	if err := l.start(ctx); err != nil {
		return err
	}
	l.deps.consuming.Store(true)
	it, err := l.cons.Messages(jetstream.PullMaxMessages(l.deps.cfg.PullBatch), jetstream.PullPriorityGroup(PriorityGroup))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", l.durable, err)
	}
	msgs, done := make(chan jetstream.Msg, maxBatch), make(chan struct{})
	readerDone := make(chan struct{})
	go l.read(it, msgs, done, readerDone)
	defer func() {
		close(done)
		it.Stop()
		<-readerDone
	}()
	tick := min(max(l.deps.cfg.ResponseQuietPeriod/4, 20*time.Millisecond), 250*time.Millisecond)
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		var err error
		select {
		case m, ok := <-msgs:
			if !ok {
				l.finish(ctx)
				return fmt.Errorf("consumer %s stopped delivering", l.durable)
			}
			err = l.onBatch(ctx, takeBatch(m, msgs))
		case <-ticker.C:
			err = l.tick(ctx)
		case <-ctx.Done():
		}
		if ctx.Err() != nil || err != nil {
			l.finish(ctx)
			return nil
		}
	}
}

// read hands the iterator's messages to the lane until done; it closes msgs
// when the iterator ends.
func (l *lane) read(it jetstream.MessagesContext, msgs chan<- jetstream.Msg, done <-chan struct{}, exited chan<- struct{}) {
	defer close(exited)
	for {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				close(msgs)
				return
			}
			l.log.Debug("consume", "err", err)
			continue
		}
		select {
		case msgs <- m:
		case <-done:
			return
		}
	}
}

// start positions the lane at the consumer's ack floor and processes the
// records delivered to a predecessor but not acknowledged, instead of
// waiting AckWait for their redelivery.
func (l *lane) start(ctx context.Context) error {
	var info *jetstream.ConsumerInfo
	err := effects.Do(ctx, l.log, "reading consumer "+l.durable, func(ctx context.Context) (err error) {
		info, err = l.cons.Info(ctx)
		return err
	})
	if err != nil {
		return err
	}
	var first uint64
	var empty bool
	err = effects.Do(ctx, l.log, "reading stream "+l.stream, func(ctx context.Context) error {
		s, err := l.deps.js.Stream(ctx, l.stream)
		if err == nil {
			first, empty = s.CachedInfo().State.FirstSeq, s.CachedInfo().State.Msgs == 0
		}
		return err
	})
	if err != nil {
		return err
	}
	l.next = info.AckFloor.Stream + 1
	l.lastDseq = info.Delivered.Consumer
	l.cache.fromStart = first >= l.next || empty
	if w := l.deps.cfg.WarmStartRecords; !l.cache.fromStart && w > 0 && l.next-first <= uint64(w) {
		if err := l.warm(ctx, first, l.next-1); err != nil {
			return err
		}
	}
	if last := info.Delivered.Stream; last >= l.next {
		if l.redeliverNow(ctx) {
			l.lastDseq = 0 // a reset consumer numbers its deliveries from 1
		} else if err := l.readRange(ctx, last+1); err != nil {
			return err
		}
	}
	l.log.Debug("consuming", "trigger", l.deps.id, "next", l.next, "from_start", l.cache.fromStart)
	return nil
}

// redeliverNow asks the server to deliver again, at once, the records a
// predecessor received and did not acknowledge: the consumer is reset to
// its ack floor (nats-server 2.14+), so they come back as deliveries this
// lane acknowledges like any other. It reports false when the server does
// not (an older server, or the request failed); the lane then reads them
// by Direct Get, and they are acknowledged when AckWait redelivers them.
func (l *lane) redeliverNow(ctx context.Context) bool {
	rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	if _, err := l.deps.js.ResetConsumer(rctx, l.stream, l.durable); err != nil {
		l.log.Debug("reading unacknowledged records by Direct Get: the consumer could not be reset to its ack floor", "err", err)
		return false
	}
	return true
}

// finish waits a bounded time for the publications and acknowledges what
// they cover.
func (l *lane) finish(ctx context.Context) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlush)
	defer cancel()
	if err := l.flush(fctx); err != nil {
		l.log.Warn("stopping with unconfirmed extraction requests; their records will be redelivered", "pending", l.em.pending(), "err", err)
	}
}

// flush waits until every publication is stored, then acknowledges.
func (l *lane) flush(ctx context.Context) error {
	if err := l.em.await(ctx); err != nil {
		return err
	}
	if l.failed {
		return errors.New("a decision was not published")
	}
	l.led.ack(l.next)
	return nil
}

// takeBatch returns m and the deliveries already waiting, up to maxBatch.
func takeBatch(m jetstream.Msg, msgs <-chan jetstream.Msg) []jetstream.Msg {
	batch := []jetstream.Msg{m}
	for len(batch) < maxBatch {
		select {
		case m, ok := <-msgs:
			if !ok {
				return batch
			}
			batch = append(batch, m)
		default:
			return batch
		}
	}
	return batch
}

// onBatch rebuilds the sessions a batch needs in parallel, then processes
// its deliveries in order.
func (l *lane) onBatch(ctx context.Context, batch []jetstream.Msg) error {
	if err := l.prefetch(ctx, batch); err != nil {
		return err
	}
	for _, m := range batch {
		if err := l.onMsg(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// onMsg processes one delivery. Records are applied strictly in stream
// order: a delivery already processed is only remembered for the next
// ack; records this lane did not receive (a lost delivery, another
// replica's window) are read by Direct Get first.
func (l *lane) onMsg(ctx context.Context, m jetstream.Msg) error {
	md, err := m.Metadata()
	if err != nil {
		return nil
	}
	seq, dseq := md.Sequence.Stream, md.Sequence.Consumer
	l.lag.Store(int64(md.NumPending))
	l.deps.stats.delivered.Add(1)
	gap := dseq != l.lastDseq+1
	l.lastDseq = max(l.lastDseq, dseq)
	if seq < l.next {
		l.deps.stats.redelivered.Add(1)
		l.led.delivered(m, seq)
		return nil
	}
	if gap || (l.filter == "" && seq > l.next) {
		if err := l.fillGap(ctx, seq); err != nil {
			return err
		}
	}
	if err := l.process(ctx, seq, md.Timestamp.UnixNano(), m.Subject(), m.Headers(), m.Data()); err != nil {
		return err
	}
	l.next = seq + 1
	l.led.delivered(m, seq)
	l.led.unflushed++
	if l.led.unflushed >= l.deps.cfg.AckEvery {
		return l.flush(ctx)
	}
	return nil
}

// fillGap processes this lane's records from l.next to upTo-1 that were not
// delivered to it. If the consumer's ack floor shows another replica
// processed them, its progress is adopted and every session in memory is
// dropped (it may be stale) to be rebuilt on demand.
func (l *lane) fillGap(ctx context.Context, upTo uint64) error {
	var info *jetstream.ConsumerInfo
	err := effects.Do(ctx, l.log, "reading consumer "+l.durable, func(ctx context.Context) (err error) {
		info, err = l.cons.Info(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if info.AckFloor.Stream+1 > l.next {
		l.deps.stats.takeovers.Add(1)
		l.log.Debug("takeover", "trigger", l.deps.id, "next", l.next, "floor", info.AckFloor.Stream)
		l.cache.dropAll()
		l.led.dropHolds()
		l.next = info.AckFloor.Stream + 1
	}
	return l.readRange(ctx, upTo)
}

// readRange processes the lane's stored records from l.next to upTo-1 by
// batch Direct Get, retrying from where it stopped; l.next ends at upTo
// (what was not found was deleted or belongs to another lane).
func (l *lane) readRange(ctx context.Context, upTo uint64) error {
	if l.next >= upTo {
		return nil
	}
	var perr error
	err := effects.Do(ctx, l.log, "reading skipped transcript records", func(rctx context.Context) error {
		return directRange(rctx, l.deps.nc, l.stream, l.filter, l.next, upTo-1, func(seq uint64, ts int64, subject string, h nats.Header, data []byte) bool {
			l.deps.stats.gapFilled.Add(1)
			if perr = l.process(ctx, seq, ts, subject, h, data); perr != nil {
				return false
			}
			l.next = seq + 1
			return true
		})
	})
	if perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	l.next = upTo
	return nil
}

// settings resolves a tenant's thresholds and gate (cached until the
// tenant configuration changes).
func (l *lane) settings(tenant string) *tenantSettings {
	d := l.deps
	// A configuration change empties the cache before the next record is
	// decided, so new thresholds and gates apply from that record on.
	if d.tenants != nil {
		if rev := d.tenants.Revision(); rev != l.thRev {
			clear(l.thCache)
			l.thRev = rev
		}
	}
	if ts := l.thCache[tenant]; ts != nil {
		return ts
	}
	ts := &tenantSettings{th: d.base, gated: d.cfg.SessionMemoryOff}
	if d.tenants != nil {
		c := d.tenants.Get(tenant)
		ts.th = d.base.Override(c)
		ts.gated = !tenantcfg.Bool(c.SessionMemory, !d.cfg.SessionMemoryOff)
	}
	l.thCache[string([]byte(tenant))] = ts
	return ts
}
