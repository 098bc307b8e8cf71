package extractorsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// errConflict: the memory changed since it was read (another, late worker
// committed first).
var errConflict = errors.New("memory revision changed during the extraction")

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
		attribute.Int64("recall.revision", int64(rev))),
		trace.WithAttributes(telemetry.MemoryOp(telemetry.OpUpdateMemory, events.BucketMemory, session)...))
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
