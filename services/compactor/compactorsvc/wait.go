package compactorsvc

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// waitForExtraction waits while an extraction of the session runs, at most
// timeout, and returns how long it waited. It watches the session's
// RECALL_STATUS key, so it wakes the moment the status is deleted, purged,
// expires or says the extraction stopped; there is no polling. A status
// whose extraction started more than stale ago is ignored, and the wait ends
// when the running one becomes stale. Errors end the wait (the compaction
// then uses the memory as it is).
func (c *Compactor) waitForExtraction(ctx context.Context, key string, timeout, stale time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	e, err := c.status.Get(ctx, key)
	if err != nil {
		return 0 // not found, deleted, or unreadable: nothing to wait for
	}
	limit, ok := runningFor(e, stale, timeout)
	if !ok {
		return 0
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	w, err := c.status.Watch(wctx, key)
	if err != nil {
		c.log.WarnContext(ctx, "watching extraction status", "key", key, "err", err)
		return time.Since(start)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return time.Since(start)
			}
			if e == nil {
				continue // end of the initial value
			}
			if _, running := runningFor(e, stale, timeout); !running {
				return time.Since(start)
			}
		case <-wctx.Done():
			return time.Since(start)
		}
	}
}

// runningFor reports whether e is the status of a running, fresh extraction
// and how long it may still be waited for (at most timeout, at most until it
// becomes stale).
func runningFor(e jetstream.KeyValueEntry, stale, timeout time.Duration) (time.Duration, bool) {
	if e.Operation() != jetstream.KeyValuePut {
		return 0, false
	}
	var st events.StatusRecord
	if err := json.Unmarshal(e.Value(), &st); err != nil || !st.Running {
		return 0, false
	}
	left := stale - time.Since(st.Since)
	if left <= 0 {
		return 0, false
	}
	return min(left, timeout), true
}
