package longtermsvc

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/shardgroup"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// PriorityGroup is the pinned priority group of the service's consumers:
// one replica at a time reads a shard.
const PriorityGroup = "recall"

// consumerConfig follows the transcript for commit points: a session's end
// and each compaction the platform reports. A record is acknowledged once
// its commit request is queued.
func (c Config) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        events.DurableLongTerm,
		Description:    "Recall long-term memory: commit points (session ends, compactions) to RECALL_COMMITS",
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        time.Minute,
		MaxAckPending:  4096,
		MaxDeliver:     -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{PriorityGroup},
		PinnedTTL:      30 * time.Second,
	}
}

// consumer turns commit points into queued commit requests. The replicas
// share the transcript's shards (RECALL_LTM_FOLLOWERS), each reading only
// its own; the commits themselves run wherever the commit group places
// their user.
type consumer struct {
	c     *committer
	js    jetstream.JetStream
	group *shardgroup.Group
}

func newConsumer(c *committer, js jetstream.JetStream) (*consumer, error) {
	k := &consumer{c: c, js: js}
	g, err := shardgroup.New(js, shardgroup.Config{Layout: c.cfg.Layout(), Bucket: events.BucketLTMFollowers,
		Member: c.cfg.ID, Consumer: c.cfg.consumerConfig(), Handle: k.handle, Log: c.log})
	if err != nil {
		return nil, err
	}
	k.group = g
	return k, nil
}

// handle queues a commit at a session's end or a reported compaction; every
// other record is acknowledged at once. Commit points are handled one after
// the other, so a user's requests are queued in transcript order.
func (k *consumer) handle(ctx context.Context, m jetstream.Msg) {
	tenant, session, ok := events.SplitSessionSubject(m.Subject())
	meta, err := m.Metadata()
	if !ok || err != nil {
		_ = m.Ack()
		return
	}
	typ := recordType(m)
	if typ != events.TypeSessionEnded && typ != events.TypeSessionCompacted {
		_ = m.Ack()
		return
	}
	reason := events.CommitReasonSessionEnded
	if typ == events.TypeSessionCompacted {
		reason = events.CommitReasonCompaction
	}
	job := commitJob{tenant: tenant, session: session, reason: reason, upTo: meta.Sequence.Stream}
	err = k.c.enqueue(ctx, k.js, job)
	switch {
	case err == nil:
		_ = m.Ack()
	case errors.Is(err, errNoUser):
		k.c.log.Debug("no commit: the session has no user", "session", session, "err", err)
		_ = m.Ack()
	case ctx.Err() != nil:
	default:
		k.c.log.Warn("commit point not queued; will retry", "session", session, "err", err)
		_ = m.NakWithDelay(5 * time.Second)
	}
}

// recordType is a stored record's CloudEvents type: the binary-mode
// ce-type header, or (structured mode) the decoded event's.
func recordType(m jetstream.Msg) string {
	if t := m.Headers().Get("ce-type"); t != "" {
		return t
	}
	rec, err := transcript.Decode(m.Headers(), m.Data())
	if err != nil {
		return ""
	}
	return rec.Type()
}
