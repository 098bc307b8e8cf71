// Package follow runs a service's durable consumer on a stream as a pinned
// priority group: every replica runs one, the server delivers to one of
// them (the pinned one), and another takes over within the consumer's
// PinnedTTL when it goes. The indexer and long-term memory follow the
// transcript this way.
package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/retry"
)

// Follower consumes Stream with the durable Consumer (whose
// PriorityGroups[0] is the pinned group) and hands every message to Handle,
// one after the other, until the context ends. Handle settles the message.
type Follower struct {
	JS       jetstream.JetStream
	Stream   string
	Consumer jetstream.ConsumerConfig
	Handle   func(ctx context.Context, m jetstream.Msg)
	Log      *slog.Logger

	consuming atomic.Bool
}

// Consuming reports whether the follower has a live message iterator (it
// may be the pinned replica or a standby).
func (f *Follower) Consuming() bool { return f.consuming.Load() }

// Run creates or updates the durable (retried while the cluster is
// degraded) and consumes; a consumer that stops is restarted after a
// second (Consume). It returns nil when ctx ends.
func (f *Follower) Run(ctx context.Context) error {
	Consume(ctx, f.Log, f.Consumer.Durable, restartAfterASecond, f.open, f.consume)
	return nil
}

// restartAfterASecond is the Follower's wait before a stopped consumer is
// created and consumed again.
var restartAfterASecond = retry.Policy{First: time.Second, Max: time.Second}

// open creates or updates the durable, retried with provision.Retry until
// it succeeds or ctx ends.
func (f *Follower) open(ctx context.Context) (cons jetstream.Consumer, err error) {
	err = provision.Retry(ctx, f.Log, "creating consumer "+f.Consumer.Durable, func(ctx context.Context) (err error) {
		cons, err = f.JS.CreateOrUpdateConsumer(ctx, f.Stream, f.Consumer)
		return err
	})
	return cons, err
}

func (f *Follower) consume(ctx context.Context, cons jetstream.Consumer) error {
	group := ""
	if len(f.Consumer.PriorityGroups) > 0 {
		group = f.Consumer.PriorityGroups[0]
	}
	return Messages(ctx, cons, group, f.Log, f.consuming.Store, f.Handle)
}

// Messages hands every message of cons (pulled as a member of priority
// group, when set) to handle, one after the other, until ctx ends or the
// iterator closes (an error: the caller restarts it). live, when not nil,
// is told when the iterator starts (true) and when it ends (false).
func Messages(ctx context.Context, cons jetstream.Consumer, group string, log *slog.Logger, live func(bool),
	handle func(context.Context, jetstream.Msg)) error {
	opts := []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(256)}
	if group != "" {
		opts = append(opts, jetstream.PullPriorityGroup(group))
	}
	durable := cons.CachedInfo().Name
	it, err := cons.Messages(opts...)
	if err != nil {
		return fmt.Errorf("consuming %s: %w", durable, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	if live != nil {
		live(true)
		defer live(false)
	}
	for {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return errors.New("the message iterator closed")
		}
		if err != nil {
			log.Debug("consume", "durable", durable, "err", err)
			continue
		}
		handle(ctx, m)
	}
}
