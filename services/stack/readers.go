package stack

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// transcriptReaders are the durables the stack's services follow on every
// shard of the transcript.
var transcriptReaders = []string{events.DurableTrigger, events.DurableIndexer, events.DurableLongTerm}

// waitReaders waits until every transcript reader pulls from every shard
// (a pull request waits on its durable): the services answer discovery
// before their shard groups settle and take the shards, and a platform
// whose first events arrive then would see them indexed a moment later
// than "up" promised.
func (s *Stack) waitReaders(ctx context.Context, layout events.Layout) error {
	nc, err := nats.Connect(s.NATSURL, s.AdminOptions()...)
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w", s.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, stream := range layout.Streams() {
		for _, durable := range transcriptReaders {
			for !s.pulling(ctx, js, stream, durable) {
				select {
				case <-s.done:
					return s.Err()
				default:
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s does not read %s after 60s", durable, stream)
				}
				if !retry.Pause(ctx.Done(), pollEvery) {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

// pulling reports whether durable on stream has a waiting pull request.
func (s *Stack) pulling(ctx context.Context, js jetstream.JetStream, stream, durable string) bool {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := js.Consumer(cctx, stream, durable)
	if err != nil {
		return false
	}
	info, err := c.Info(cctx)
	return err == nil && info.NumWaiting > 0
}
