package pcgroup

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// consumePartition runs Config.Consume on partition r.p's consumer until
// r.stop is closed, restarting it with a backoff when it fails, then
// unpins.
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
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		cons, err := g.ensureConsumer(ctx, stream, r.p)
		if err == nil {
			err = g.cfg.Consume(ctx, r.p, cons)
		}
		if ctx.Err() != nil {
			break
		}
		log.WarnContext(ctx, "consuming partition; restarting", "durable", durable, "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(hctx), 2*time.Second)
	defer ucancel()
	if err := stream.UnpinConsumer(uctx, durable, g.cfg.PriorityGroup); err != nil {
		log.DebugContext(uctx, "unpinning", "durable", durable, "err", err)
	}
}
