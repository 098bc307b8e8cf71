package triggersvc

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/memory"
)

// warm rebuilds every session of the lane from one sequential read of the
// transcript (records from..to, the lane's acknowledged history), instead
// of one Direct Get walk per session on its next record: reading the
// stream once costs far less than a per-subject walk per session, which
// the store serves by scanning from one of the session's records to the
// next. Decisions are not emitted (they were published before their
// records were acknowledged). When the sessions do not fit the cache, or
// the transcript cannot be read, the warm start is abandoned and sessions
// are rebuilt one by one as before; the lane is then exactly as if warm had
// not run. An error means ctx ended.
func (l *lane) warm(ctx context.Context, from, to uint64) error {
	began := time.Now()
	l.cache.fromStart = true
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	batches := make(chan []warmRecord, 4)
	readErr := make(chan error, 1)
	go func() { readErr <- l.readWarm(rctx, from, to, batches) }()
	n, abandoned := l.applyWarm(batches)
	stop() // an abandoned warm start stops the read
	for range batches {
	}
	err := <-readErr
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if abandoned || err != nil {
		// The lane is then exactly as if warm had not run: sessions are
		// rebuilt one by one on their next record.
		l.cache.dropAll()
		if err != nil {
			l.log.Warn("warm start abandoned: the transcript could not be read; rebuilding sessions one by one", "err", err)
		} else {
			l.log.Info("warm start abandoned: the sessions do not fit the cache; rebuilding them one by one", "sessions", l.cache.max)
		}
		return nil
	}
	for _, s := range l.cache.sessions {
		if pseq, pts, ok := s.st.Pending(); ok {
			th := l.settings(s.tenant()).th
			l.led.hold(hold{s: s, seq: pseq, deadline: pts + int64(th.QuietPeriod)})
		}
	}
	l.deps.stats.warmed.Add(int64(l.cache.len()))
	l.log.Info("warm start", "sessions", l.cache.len(), "records", n, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// warmRecord is one of the lane's records read by the warm start.
type warmRecord struct {
	seq  uint64
	ts   int64
	key  string
	dot  int
	h    nats.Header
	data []byte
}

// warmBatchLen is how many records the warm start's reader hands over at
// once.
const warmBatchLen = 512

// warmPull is how many records the warm start's consumer keeps buffered.
const warmPull = 2048

// readWarm reads records from..to of the transcript in order through an
// ephemeral ordered consumer (a stream read at the server's delivery rate,
// several times what batch Direct Gets give), keeps the lane's own, and
// sends them in batches; it closes batches when done. The read runs beside
// applyWarm, so reading the stream and decoding it use both cores.
func (l *lane) readWarm(ctx context.Context, from, to uint64, batches chan<- []warmRecord) error {
	defer close(batches)
	var it jetstream.MessagesContext
	err := effects.Do(ctx, l.log, "opening the transcript for a warm start", func(rctx context.Context) error {
		cons, err := l.deps.js.OrderedConsumer(rctx, l.stream, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from, InactiveThreshold: time.Minute})
		if err == nil {
			it, err = cons.Messages(jetstream.PullMaxMessages(warmPull))
		}
		return err
	})
	if err != nil {
		return err
	}
	defer it.Stop()
	batch := make([]warmRecord, 0, warmBatchLen)
	send := func() bool {
		select {
		case batches <- batch:
			batch = make([]warmRecord, 0, warmBatchLen)
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("reading the transcript for a warm start: %w", err)
		}
		md, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("reading the transcript for a warm start: %w", err)
		}
		if md.Sequence.Stream > to {
			break
		}
		if key, dot, ok := sessionKey(m.Subject()); ok && l.mine(key, dot) {
			batch = append(batch, warmRecord{seq: md.Sequence.Stream, ts: md.Timestamp.UnixNano(), key: key, dot: dot, h: m.Headers(), data: m.Data()})
			if len(batch) == warmBatchLen && !send() {
				return ctx.Err()
			}
		}
		if md.Sequence.Stream >= to || md.NumPending == 0 {
			break
		}
	}
	if len(batch) > 0 && !send() {
		return ctx.Err()
	}
	return nil
}

// applyWarm rebuilds the sessions of the records it receives, in order,
// without emitting; it reports how many records it applied and whether it
// gave up because the sessions do not fit the cache.
func (l *lane) applyWarm(batches <-chan []warmRecord) (n int, abandoned bool) {
	var discard []memory.TriggerDecision
	now := time.Now().UnixNano()
	for batch := range batches {
		for _, r := range batch {
			n++
			s := l.cache.get(r.key, now)
			if s == nil {
				if l.cache.needsRebuild(r.key, r.seq) || l.cache.len() >= l.cache.max {
					return n, true
				}
				s = newSession(r.key, r.dot, now)
				l.cache.add(s)
			}
			rec, _ := decodeOrSkip(r.seq, r.ts, r.h, r.data)
			th := &l.settings(s.tenant()).th
			before := s.st.Size()
			discard = s.st.Observe(rec, th, discard[:0])
			l.deps.stats.bytes.Add(int64(s.st.Size() - before))
			if _, _, pending := s.st.Pending(); s.st.Ended() && !pending {
				l.cache.evict(s)
			}
		}
	}
	return n, false
}
