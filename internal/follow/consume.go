package follow

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/retry"
)

// Consume is Recall's one consumer loop: it keeps the durable consumer
// named durable consumed until ctx ends. It gets the consumer with open
// (which may retry on its own, with ctx), hands it to consume, and when
// either fails before ctx ends, logs the error and starts again with a
// fresh open after the next wait of restart (the waits grow across
// restarts for as long as Consume runs). It returns when ctx ends, at once
// if that happens while it waits; open and consume must return once ctx
// ends. Releasing the consumer (unpinning) is the caller's: Consume knows
// nothing of priority groups.
func Consume(ctx context.Context, log *slog.Logger, durable string, restart retry.Policy,
	open func(context.Context) (jetstream.Consumer, error), consume func(context.Context, jetstream.Consumer) error) {
	backoff := restart.Backoff()
	for ctx.Err() == nil {
		cons, err := open(ctx)
		if err == nil {
			err = consume(ctx, cons)
		}
		if ctx.Err() != nil {
			return
		}
		wait := backoff.Next()
		log.WarnContext(ctx, "consumer stopped; restarting", "durable", durable, "err", err, "in", wait)
		retry.Pause(ctx.Done(), wait)
	}
}
