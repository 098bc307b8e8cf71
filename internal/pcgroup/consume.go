package pcgroup

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/follow"
)

// consumePartition runs Config.Consume on partition r.p's consumer until
// r.stop is closed, restarting it with restartBackoff when it fails
// (follow.Consume), then unpins.
func (g *Group) consumePartition(hctx context.Context, stream jetstream.Stream, r *runner) {
	defer close(r.done)
	ctx, cancel := context.WithCancel(hctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	log := g.log.With("member", g.cfg.Member, "partition", r.p)
	durable := g.cfg.Durable(r.p)
	follow.Consume(ctx, log, durable, restartBackoff,
		func(ctx context.Context) (jetstream.Consumer, error) { return g.ensureConsumer(ctx, stream, r.p) },
		func(ctx context.Context, cons jetstream.Consumer) error { return g.cfg.Consume(ctx, r.p, cons) })
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(hctx), 2*time.Second)
	defer ucancel()
	if err := stream.UnpinConsumer(uctx, durable, g.cfg.PriorityGroup); err != nil {
		log.DebugContext(uctx, "unpinning", "durable", durable, "err", err)
	}
}
