package extractorsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// Reads that decide what an extraction builds on go to the stream leader of
// RECALL_MEMORY ($JS.API.STREAM.MSG.GET, which only the leader answers),
// not to Direct Get, which any replica answers and which may lag behind a
// commit the leader acknowledged. On top of that the worker remembers the
// last revision it committed per session (knownRevs) and, when a read is
// older (a leader elected a moment ago that has not applied it yet), reads
// again for up to freshWait before it goes on; the fenced commit still
// catches what is left, and every discard is counted (fenceDiscards).

// freshWait is how long a read older than a known commit is repeated.
const freshWait = 2 * time.Second

// Causes of a fence discard (metric label "cause").
const (
	CauseStaleRead  = "stale_read"        // the revision that beat us existed before our read
	CauseConcurrent = "concurrent_commit" // another worker committed while we extracted
)

var (
	fenceCounter, _ = meter.Int64Counter("recall_extraction_fence_discards",
		metric.WithDescription("extraction results discarded by the fenced commit (a wasted model call), by cause (stale_read, concurrent_commit)"))
	fenceStale, fenceConcurrent atomic.Int64
)

// FenceDiscards returns how many extraction results this process discarded
// at the fenced commit since it started, by cause (also exported as the
// metric recall_extraction_fence_discards_total).
func FenceDiscards() (staleRead, concurrent int64) {
	return fenceStale.Load(), fenceConcurrent.Load()
}

func countFenceDiscard(ctx context.Context, cause string) {
	if cause == CauseStaleRead {
		fenceStale.Add(1)
	} else {
		fenceConcurrent.Add(1)
	}
	fenceCounter.Add(ctx, 1, metric.WithAttributes(attribute.String("cause", cause)))
}

// knownRevs is the last memory revision this process committed or read
// from the leader, per session key, bounded to maxKnown keys (an arbitrary
// key is forgotten when full). Safe for concurrent use.
type knownRevs struct {
	mu sync.Mutex
	m  map[string]uint64
}

const maxKnown = 100_000

func (k *knownRevs) get(key string) uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[key]
}

func (k *knownRevs) note(key string, rev uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]uint64{}
	}
	if _, ok := k.m[key]; !ok && len(k.m) >= maxKnown {
		for old := range k.m {
			delete(k.m, old)
			break
		}
	}
	k.m[key] = max(k.m[key], rev)
}

// leaderEntry is one memory revision read from the leader.
type leaderEntry struct {
	record   events.MemoryRecord
	revision uint64    // 0: no memory (absent or deleted)
	stored   time.Time // when the revision was stored
}

// readTimeout bounds one leader read: a request the server never answers
// (it restarted, the leader moved) fails instead of holding the handler.
const readTimeout = 5 * time.Second

// readLeader reads the newest revision of a memory key from the stream
// leader of the bucket, within readTimeout.
func readLeader(ctx context.Context, nc *nats.Conn, key string) (leaderEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + events.BucketMemory + "." + key})
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+events.BucketMemory, req)
	if err != nil {
		return leaderEntry{}, fmt.Errorf("reading memory from the leader: %w", err)
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
		Msg   *struct {
			Seq  uint64    `json:"seq"`
			Hdrs []byte    `json:"hdrs"`
			Data []byte    `json:"data"`
			Time time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return leaderEntry{}, fmt.Errorf("decoding memory from the leader: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return leaderEntry{}, nil
	case resp.Error != nil:
		return leaderEntry{}, fmt.Errorf("reading memory from the leader: %w", resp.Error)
	case resp.Msg == nil:
		return leaderEntry{}, errors.New("reading memory from the leader: empty answer")
	}
	if len(resp.Msg.Hdrs) > 0 {
		if h, err := nats.DecodeHeadersMsg(resp.Msg.Hdrs); err == nil && h.Get("KV-Operation") != "" {
			return leaderEntry{stored: resp.Msg.Time}, nil // deleted or purged
		}
	}
	rec, err := store.DecodeMemory(key, resp.Msg.Seq, resp.Msg.Data)
	if err != nil {
		return leaderEntry{}, err
	}
	return leaderEntry{record: rec, revision: resp.Msg.Seq, stored: resp.Msg.Time}, nil
}

// readFresh reads a session's memory from the leader, at least as new as
// the last revision this process knows of; when the leader is behind it,
// it reads again for up to freshWait, then returns the newest it got.
func (w *Worker) readFresh(ctx context.Context, key string) (leaderEntry, error) {
	known := w.known.get(key)
	deadline := time.Now().Add(freshWait)
	for {
		e, err := readLeader(ctx, w.nc, key)
		if err != nil || e.revision >= known || time.Now().After(deadline) {
			if err == nil {
				w.known.note(key, e.revision)
			}
			return e, err
		}
		if !retry.Pause(ctx.Done(), 50*time.Millisecond) {
			return e, ctx.Err()
		}
	}
}

// fenceCause counts a fence discard of req's extraction, whose memory was
// read at readAt, and returns its cause: stale_read when the newest
// revision on the leader was stored before that read (the read missed a
// commit that existed), else concurrent_commit. A later commit on top of
// the one that beat us makes a stale read count as concurrent.
func (w *Worker) fenceCause(ctx context.Context, req request, readAt time.Time) string {
	cause := CauseConcurrent
	if e, err := readLeader(ctx, w.nc, events.MemoryKey(req.Tenant, req.Session)); err == nil && !e.stored.IsZero() && e.stored.Before(readAt) {
		cause = CauseStaleRead
	}
	countFenceDiscard(ctx, cause)
	return cause
}
