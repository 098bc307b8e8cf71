package longtermsvc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// PriorityGroup is the pinned priority group of the service's consumer:
// one replica consumes, the others stand by.
const PriorityGroup = "recall"

// consumerConfig follows the transcript for commit points: a session's end
// and each compaction the platform reports. A record is acknowledged once
// its commit's outcome is stored.
func (c Config) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        events.DurableLongTerm,
		Description:    "Recall long-term memory: commits at session ends and compactions",
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.Timeout + c.CommitWait + time.Minute,
		MaxAckPending:  4096,
		MaxDeliver:     -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{PriorityGroup},
		PinnedTTL:      30 * time.Second,
	}
}

// consumer starts commits at commit points.
type consumer struct {
	c         *committer
	js        jetstream.JetStream
	jobs      sync.WaitGroup
	consuming atomic.Bool
}

func (k *consumer) run(ctx context.Context) error {
	defer k.wait(10 * time.Second)
	for ctx.Err() == nil {
		var cons jetstream.Consumer
		err := provision.Retry(ctx, k.c.log, "creating consumer "+events.DurableLongTerm, func(ctx context.Context) (err error) {
			cons, err = k.js.CreateOrUpdateConsumer(ctx, events.StreamTranscript, k.c.cfg.consumerConfig())
			return err
		})
		if err != nil {
			return nil
		}
		err = k.consume(ctx, cons)
		if ctx.Err() != nil {
			return nil
		}
		k.c.log.Warn("long-term memory consumer stopped; restarting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

func (k *consumer) wait(limit time.Duration) {
	done := make(chan struct{})
	go func() { k.jobs.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		k.c.log.Warn("commits still running at shutdown; their records will be redelivered")
	}
}

func (k *consumer) consume(ctx context.Context, cons jetstream.Consumer) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(256), jetstream.PullPriorityGroup(PriorityGroup))
	if err != nil {
		return fmt.Errorf("consuming %s: %w", events.DurableLongTerm, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	k.consuming.Store(true)
	defer k.consuming.Store(false)
	for {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return errors.New("the message iterator closed")
		}
		if err != nil {
			continue
		}
		k.handle(ctx, m)
	}
}

// handle starts a commit at a session's end or a reported compaction;
// every other record is acknowledged at once.
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
	k.jobs.Add(1)
	go func() {
		defer k.jobs.Done()
		_, err := k.c.commit(ctx, job)
		switch {
		case err == nil, errors.Is(err, errNothingNew), errors.Is(err, errNoUser), errors.Is(err, errPolicy):
			if errors.Is(err, errPolicy) {
				k.c.log.Warn("commit refused", "session", session, "err", err)
			}
			_ = m.Ack()
		case ctx.Err() != nil:
		default:
			k.c.log.Warn("commit could not run; will retry", "session", session, "err", err)
			_ = m.NakWithDelay(5 * time.Second)
		}
	}()
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
