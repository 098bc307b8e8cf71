package longtermsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// Commit points become commit requests on RECALL_COMMITS, keyed by user;
// the replicas share its partitions (a partitioned consumer group, as the
// extractors share RECALL_EXTRACT), so commits spread over the replicas by
// user while each user's run one at a time, in order.

// enqueue queues job for its session's user. The message id makes a
// redelivered commit point queue one request.
func (c *committer) enqueue(ctx context.Context, js jetstream.JetStream, job commitJob) error {
	started, err := c.started(ctx, job.tenant, job.session)
	if err != nil {
		return err
	}
	if started == nil || started.UserID == "" {
		return errNoUser
	}
	if err := events.ValidateID(started.UserID); err != nil {
		return fmt.Errorf("%w: user_id: %v", errNoUser, err)
	}
	body, err := json.Marshal(events.CommitQueued{Session: job.session, Reason: job.reason, UpTo: job.upTo})
	if err != nil {
		return err
	}
	m := nats.NewMsg(events.CommitSubject(job.tenant, started.UserID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, job.tenant+":"+job.session+":"+strconv.FormatUint(job.upTo, 10))
	natsce.Inject(ctx, m.Header)
	_, err = js.PublishMsg(ctx, m)
	if err != nil {
		return fmt.Errorf("queueing the commit of %s: %w", job.session, err)
	}
	c.m.queued.Add(ctx, 1)
	return nil
}

// newGroup is this replica's membership of the commit group.
func (c *committer) newGroup(js jetstream.JetStream) (*pcgroup.Group, error) {
	cfg := c.cfg
	return pcgroup.New(js, pcgroup.Config{
		Stream:        events.StreamCommits,
		Partitions:    cfg.Partitions,
		Filter:        events.CommitPartitionFilter,
		Durable:       events.CommitDurable,
		PriorityGroup: PriorityGroup,
		Bucket:        events.BucketLTMMembers,
		Member:        c.holder,
		HeartbeatTTL:  cfg.HeartbeatTTL,
		// In-progress acks every third of it keep a long commit's request.
		AckWait:     30 * time.Second,
		RetryDelay:  5 * time.Second,
		Concurrency: cfg.Concurrency,
		// Several users of one partition at once, one commit of a user at a
		// time and in order.
		KeyOf:    userKey,
		InFlight: 2 * cfg.Concurrency,
		Log:      c.log,
	}, c.handleQueued)
}

// userKey is the <tenant>.<user> part of
// recall.commitp.<p>.<tenant>.<user>.
func userKey(subject string) string {
	rest := strings.TrimPrefix(subject, events.SubjectCommitPartitioned+".")
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		return rest[i+1:]
	}
	return subject
}

// handleQueued runs one queued commit. Outcomes that another attempt
// cannot change (done, nothing new, no user, a refused policy) settle the
// request; a failed commit is tried again after a backoff, and parked
// (then settled) on its MaxAttempts-th delivery.
func (c *committer) handleQueued(ctx context.Context, m *pcgroup.Msg) error {
	tenant, user, _ := strings.Cut(userKey(m.Subject()), ".")
	var q events.CommitQueued
	if err := json.Unmarshal(m.Data(), &q); err != nil || events.ValidateID(q.Session) != nil || events.ValidateID(tenant) != nil {
		c.log.Warn("unreadable commit request dropped", "subject", m.Subject())
		return m.Term("unreadable commit request")
	}
	ctx = natsce.Extract(ctx, m.Headers())
	job := commitJob{tenant: tenant, session: q.Session, reason: q.Reason, upTo: q.UpTo}
	_, err := c.commit(ctx, job)
	switch {
	case err == nil, errors.Is(err, errNothingNew), errors.Is(err, errNoUser):
		return nil
	case errors.Is(err, errPolicy):
		c.log.Warn("commit refused", "tenant", tenant, "session", q.Session, "err", err)
		return nil
	case ctx.Err() != nil:
		// Stopping or handed off: the next owner gets the request.
		return ctx.Err()
	}
	return c.retryOrPark(ctx, m, job, user, err)
}
