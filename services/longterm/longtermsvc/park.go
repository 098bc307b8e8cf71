package longtermsvc

import (
	"context"
	"time"

	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/pkg/retry"
)

// A queued commit that fails (the model, a write, a read) is redelivered
// with a growing delay, the way the extractor retries its requests, and
// parked in RECALL_LTM_STATE on its MaxAttempts-th delivery (listed and
// replayed with recall commit --failed / --replay-failed and the operator
// console). It is acknowledged only once committed or parked: the session's
// batch is never passed over.

// retryOrPark settles a queued commit that failed with cause: a Nak with
// the backoff of its delivery, or, on its last delivery, parking and an
// ack. If parking fails the request is left for redelivery.
func (c *committer) retryOrPark(ctx context.Context, m *pcgroup.Msg, job commitJob, user string, cause error) error {
	delivered := 1
	if meta, err := m.Metadata(); err == nil {
		delivered = int(meta.NumDelivered)
	}
	log := c.log.With("tenant", job.tenant, "session", job.session, "up_to", job.upTo, "deliveries", delivered)
	if delivered < c.cfg.MaxAttempts {
		delay := c.cfg.retryDelay(delivered)
		log.Warn("commit failed; will retry", "in", delay, "err", cause)
		return m.Nak(delay)
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p := parked.Commit{Tenant: job.tenant, User: user, Session: job.session, Reason: job.reason, UpTo: job.upTo,
		Error: cause.Error(), Attempts: delivered, ParkedAt: time.Now().UTC(), Worker: c.holder}
	if err := parked.PutCommit(pctx, c.state, &p); err != nil {
		log.Error("parking a failed commit; leaving it in the queue", "err", err, "cause", cause)
		return m.Nak(c.cfg.retryDelay(delivered))
	}
	log.Error("commit kept failing; parked (replay with recall commit --replay-failed)", "key", p.Key, "err", cause)
	c.m.parked.Add(pctx, 1)
	// Parked: remove it from the work queue (an ack deletes it there).
	if err := m.Ack(pctx); err != nil {
		log.Warn("removing a parked commit from the queue", "err", err)
	}
	return nil
}

// retryDelay is the wait before delivery delivered+1 of a failed commit:
// RetryBackoff, doubling per delivery, at most 32 times it.
func (c Config) retryDelay(delivered int) time.Duration {
	return retry.Policy{First: c.RetryBackoff, Max: 32 * c.RetryBackoff}.After(delivered)
}
