package triggersvc

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// maxChecksPerTick bounds the Direct Get confirmations of quiet responses
// per tick.
const maxChecksPerTick = 256

// process applies one stored record and publishes the decisions it causes.
// It returns an error only when ctx ended before the session could be
// rebuilt or a decision published; the record then counts as not
// processed.
func (l *lane) process(ctx context.Context, seq uint64, ts int64, subject string, h nats.Header, data []byte) error {
	l.maxSeen = max(l.maxSeen, ts)
	key, dot, ok := sessionKey(subject)
	if !ok || !l.mine(key, dot) {
		return nil
	}
	l.deps.stats.records.Add(1)
	l.deps.m.records.Add(ctx, 1)
	rec, err := decodeOrSkip(seq, ts, h, data)
	if err != nil {
		l.log.Warn("skipping undecodable transcript record", "seq", seq, "subject", subject, "err", err)
	}
	s, err := l.lookup(ctx, key, dot, seq)
	if err != nil {
		return err
	}
	ts2 := l.settings(s.tenant())
	before := s.st.Size()
	l.buf = s.st.Observe(rec, &ts2.th, l.buf[:0])
	for _, d := range l.buf {
		tp := s.trace
		if d.UpToSeq == seq {
			tp = headerGet(h, "traceparent")
		}
		if err := l.decide(ctx, s, d, tp, ts2.gated); err != nil {
			return err
		}
	}
	pseq, pts, pending := s.st.Pending()
	if pending && pseq == seq {
		s.trace = headerGet(h, "traceparent")
		l.led.hold(hold{s: s, seq: seq, deadline: pts + int64(ts2.th.QuietPeriod)})
	} else if !pending {
		s.trace = ""
	}
	l.deps.stats.bytes.Add(int64(s.st.Size() - before))
	if s.sinceSnap++; l.deps.cfg.SnapshotEvery > 0 && int(s.sinceSnap) >= l.deps.cfg.SnapshotEvery {
		s.sinceSnap = 0
		l.deps.snaps.save(ctx, s.key, seq, ts, &s.st) // s.key is the memory key
	}
	if s.st.Ended() && !pending {
		l.cache.evict(s)
	}
	return nil
}

// lookup returns the session of key, rebuilding it from the transcript
// (records before seq) when it is not in memory and may have history.
func (l *lane) lookup(ctx context.Context, key string, dot int, seq uint64) (*session, error) {
	now := time.Now().UnixNano()
	if s := l.cache.get(key, now); s != nil {
		return s, nil
	}
	s := newSession(key, dot, now)
	if !l.cache.needsRebuild(s.key, seq) {
		l.cache.add(s)
		return s, nil
	}
	if err := l.rebuild(ctx, s, seq); err != nil {
		return nil, err
	}
	l.adopt(s)
	return s, nil
}

// tick completes responses whose quiet period passed, evicts idle
// sessions, and acknowledges what was processed.
func (l *lane) tick(ctx context.Context) error {
	now := time.Now().UnixNano()
	var check []hold
	for i := range l.led.holds {
		h := l.led.holds[i]
		if !h.live() {
			continue
		}
		if h.deadline < l.maxSeen {
			// A newer record of this lane was processed: any record of
			// this session within the quiet period would have come first.
			if err := l.completeQuiet(ctx, h.s); err != nil {
				return err
			}
			continue
		}
		if now > h.deadline+int64(skewMargin) && len(check) < maxChecksPerTick {
			check = append(check, h)
		}
	}
	// The stream is idle: confirm with the transcript that no record of the
	// session follows within the quiet period (one may be in flight).
	for _, h := range check {
		if !h.live() || !l.quietConfirmed(ctx, h) {
			continue
		}
		if err := l.completeQuiet(ctx, h.s); err != nil {
			return err
		}
	}
	l.cache.evictIdle(now - int64(l.deps.cfg.SessionIdle))
	return l.flush(ctx)
}

// quietConfirmed reports whether the transcript shows no record of h's
// session within its quiet period (false when it cannot tell).
func (l *lane) quietConfirmed(ctx context.Context, h hold) bool {
	rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	recs, err := l.deps.reader.Read(rctx, h.s.tenant(), h.s.session(), h.seq+1, 0, 1)
	return err == nil && (len(recs) == 0 || recs[0].Time.UnixNano() > h.deadline)
}

func (l *lane) completeQuiet(ctx context.Context, s *session) error {
	ts := l.settings(s.tenant())
	l.buf = s.st.CompleteQuiet(&ts.th, l.buf[:0])
	for _, d := range l.buf {
		if err := l.decide(ctx, s, d, s.trace, ts.gated); err != nil {
			return err
		}
	}
	s.trace = ""
	return nil
}
