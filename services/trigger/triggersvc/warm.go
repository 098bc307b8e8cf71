package triggersvc

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/memory"
)

// errWarmAbandoned stops a warm start that cannot hold every session.
var errWarmAbandoned = errors.New("warm start abandoned")

// warm rebuilds every session of the lane from one sequential read of the
// transcript (records from..to, the lane's acknowledged history), instead
// of one Direct Get walk per session on its next record: reading the
// stream once costs far less than a per-subject walk per session, which
// the store serves by scanning from one of the session's records to the
// next. Decisions are not emitted (they were published before their
// records were acknowledged). When the sessions do not fit the cache the
// warm start is abandoned and sessions are rebuilt one by one as before;
// the lane is then exactly as if warm had not run. An error means ctx
// ended.
func (l *lane) warm(ctx context.Context, from, to uint64) error {
	began := time.Now()
	l.cache.fromStart = true
	pos, n := from, 0
	var discard []memory.TriggerDecision
	now := time.Now().UnixNano()
	var abandoned bool
	err := retry(ctx, l.log, "reading the transcript for a warm start", func(rctx context.Context) error {
		return directRange(rctx, l.t.nc, l.stream, "", pos, to, func(seq uint64, ts int64, subject string, h nats.Header, data []byte) bool {
			pos = seq + 1
			key, dot, ok := sessionKey(subject)
			if !ok || !l.mine(key, dot) {
				return true
			}
			n++
			s := l.cache.get(key, now)
			if s == nil {
				if l.cache.needsRebuild(key, seq) || l.cache.len() >= l.cache.max {
					abandoned = true
					return false
				}
				s = newSession(key, dot, now)
				l.cache.add(s)
			}
			rec, _ := decodeOrSkip(seq, ts, h, data)
			th := &l.settings(s.tenant()).th
			before := s.st.Size()
			discard = s.st.Observe(rec, th, discard[:0])
			l.t.stats.bytes.Add(int64(s.st.Size() - before))
			if _, _, pending := s.st.Pending(); s.st.Ended() && !pending {
				l.cache.evict(s)
			}
			return true
		})
	})
	if err != nil {
		return err
	}
	if abandoned {
		l.cache.dropAll()
		l.log.Info("warm start abandoned: the sessions do not fit the cache; rebuilding them one by one", "sessions", l.cache.max)
		return nil
	}
	for _, s := range l.cache.sessions {
		if pseq, pts, ok := s.st.Pending(); ok {
			th := l.settings(s.tenant()).th
			l.led.hold(hold{s: s, seq: pseq, deadline: pts + int64(th.QuietPeriod)})
		}
	}
	l.t.stats.warmed.Add(int64(l.cache.len()))
	l.log.Info("warm start", "sessions", l.cache.len(), "records", n, "took", time.Since(began).Round(time.Millisecond))
	return nil
}
