// Package follow is Recall's one consumer loop: Consume keeps a durable
// consumer consumed (create it, consume, restart after a growing wait), and
// Messages hands a consumer's messages to a handler one at a time. The
// consumer group's consume mode (internal/pcgroup) and the transcript's
// shard groups (internal/shardgroup) run on them.
package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
)

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
