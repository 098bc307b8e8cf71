package indexersvc

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/shardgroup"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// PriorityGroup is the pinned priority group of the indexer's consumers:
// one replica at a time reads a shard.
const PriorityGroup = "recall"

// consumerConfig is the indexer's durable consumer on every shard stream
// of the transcript.
// Records are acknowledged one by one, a record that causes an indexing
// only once the indexing's outcome is stored (AckWait covers the longest).
func (c Config) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        events.DurableIndexer,
		Description:    "Recall indexer: session index",
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.Timeout + c.ReindexWait + time.Minute,
		MaxAckPending:  4096,
		MaxDeliver:     -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{PriorityGroup},
		PinnedTTL:      30 * time.Second,
	}
}

// consumer follows the transcript shards this replica owns (the replicas
// share them through RECALL_INDEX_MEMBERS) and starts indexings.
type consumer struct {
	x     *Indexer
	group *shardgroup.Group
	jobs  sync.WaitGroup
}

func newConsumer(x *Indexer, js jetstream.JetStream) (*consumer, error) {
	c := &consumer{x: x}
	g, err := shardgroup.New(js, shardgroup.Config{Layout: x.cfg.Layout(), Bucket: events.BucketIndexMembers,
		Member: pcgroup.MemberID(x.cfg.MemberID), Consumer: x.cfg.consumerConfig(), Handle: c.handle, Log: x.log})
	if err != nil {
		return nil, err
	}
	c.group = g
	return c, nil
}

// run consumes until ctx is done, then waits (bounded) for running
// indexings, whose records are then acknowledged or left for redelivery.
func (c *consumer) run(ctx context.Context) error {
	defer c.wait(10 * time.Second)
	return c.group.Run(ctx)
}

func (c *consumer) wait(limit time.Duration) {
	done := make(chan struct{})
	go func() { c.jobs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		c.x.log.Warn("indexings still running at shutdown; their records will be redelivered")
	}
}

// handle looks at one transcript record: start facts and the sessions a
// <session-references> message names are stored before the ack; a user
// request is counted; a turn end or a session end starts an
// indexing that acknowledges the record when its outcome is stored.
func (c *consumer) handle(ctx context.Context, m jetstream.Msg) {
	tenant, session, ok := events.SplitSessionSubject(m.Subject())
	meta, err := m.Metadata()
	if !ok || err != nil {
		_ = m.Ack()
		return
	}
	rec, err := transcript.Decode(m.Headers(), m.Data())
	if err != nil {
		c.x.log.Warn("undecodable transcript record skipped", "subject", m.Subject(), "seq", meta.Sequence.Stream, "err", err)
		_ = m.Ack()
		return
	}
	seq := meta.Sequence.Stream
	key := events.MemoryKey(tenant, session)
	switch {
	case rec.Started != nil:
		if err := c.x.noteStarted(ctx, tenant, session, rec.Started, meta.Timestamp); err != nil {
			c.x.log.Warn("storing session start facts failed; will retry", "session", session, "err", err)
			_ = m.NakWithDelay(2 * time.Second)
			return
		}
	case rec.Ended != nil:
		c.start(ctx, m, indexJob{tenant: tenant, session: session, reason: events.IndexReasonSessionEnded, seq: seq})
		return
	case rec.Message != nil:
		if memory.IsSessionReference(rec.Message) {
			if err := c.x.noteReferences(ctx, tenant, session, rec.Message, meta.Timestamp); err != nil {
				c.x.log.Warn("storing a session's references failed; will retry", "session", session, "err", err)
				_ = m.NakWithDelay(2 * time.Second)
				return
			}
		}
		if memory.CountsAsIndexRequest(rec.Message) {
			c.x.observe(key, seq)
		}
		if memory.IsTurnEnd(rec.Message) {
			c.start(ctx, m, indexJob{tenant: tenant, session: session, reason: events.IndexReasonTurnEnd, seq: seq})
			return
		}
	}
	_ = m.Ack()
}

// start runs job in the background and settles m by its result.
func (c *consumer) start(ctx context.Context, m jetstream.Msg, job indexJob) {
	c.jobs.Add(1)
	go func() {
		defer c.jobs.Done()
		_, err := c.x.maybeIndex(ctx, job)
		switch {
		case err == nil, errors.Is(err, errNothingNew), errors.Is(err, errDisabled), errors.Is(err, errEphemeral):
			_ = m.Ack()
		case ctx.Err() != nil:
			// Stopping: the record is redelivered to whoever runs next.
		default:
			c.x.log.Warn("indexing could not run; will retry", "session", job.session, "reason", job.reason, "err", err)
			_ = m.NakWithDelay(5 * time.Second)
		}
	}()
}
