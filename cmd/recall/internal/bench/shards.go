package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/retry"
)

// shardSeqs holds one stream sequence per transcript shard (index =
// shard).
type shardSeqs []uint64

// total is the sum over the shards.
func (s shardSeqs) total() uint64 {
	var n uint64
	for _, v := range s {
		n += v
	}
	return n
}

// lastSeqs reads every shard stream's last sequence.
func (e *env) lastSeqs(ctx context.Context) (shardSeqs, error) {
	streams := e.layout().Streams()
	out := make(shardSeqs, len(streams))
	for k, name := range streams {
		s, err := e.js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", name, err)
		}
		out[k] = s.CachedInfo().State.LastSeq
	}
	return out, nil
}

// storedRecords is the number of records the transcript's shard streams
// hold.
func (e *env) storedRecords(ctx context.Context) (uint64, error) {
	var n uint64
	for _, name := range e.layout().Streams() {
		s, err := e.js.Stream(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("reading stream %s: %w", name, err)
		}
		n += s.CachedInfo().State.Msgs
	}
	return n, nil
}

// deleteDurable deletes durable from every shard stream (where it exists),
// so that the next reader under that name starts from the first record.
func (e *env) deleteDurable(ctx context.Context, durable string) {
	for _, name := range e.layout().Streams() {
		_ = e.js.DeleteConsumer(ctx, name, durable)
	}
}

// waitAcked polls durable on every shard stream until its ack floor
// reaches last[k] (shards where last[k] is 0 are not waited for). It
// returns when a shard's consumer first had delivered records and when
// every shard was acknowledged, and fails when one of svcs stops or after
// 5 minutes.
func (e *env) waitAcked(ctx context.Context, durable string, last shardSeqs, svcs ...*service) (first, end time.Time, err error) {
	deadline := time.Now().Add(5 * time.Minute)
	streams := e.layout().Streams()
	for {
		for _, svc := range svcs {
			select {
			case <-svc.done:
				return first, end, fmt.Errorf("the %s service stopped: %v", svc.name, svc.err)
			default:
			}
		}
		done, delivered, err := e.ackProgress(ctx, streams, durable, last)
		if err != nil {
			return first, end, err
		}
		now := time.Now()
		if first.IsZero() && delivered {
			first = now
		}
		if done == len(streams) {
			return first, now, nil
		}
		if now.After(deadline) {
			return first, end, fmt.Errorf("%d of %d shards' %s acknowledged %v within 5m", done, len(streams), durable, last)
		}
		if !retry.Pause(ctx.Done(), 10*time.Millisecond) {
			return first, end, ctx.Err()
		}
	}
}

// ackProgress counts the shards whose durable acknowledged last[k], and
// tells whether any of them delivered a record.
func (e *env) ackProgress(ctx context.Context, streams []string, durable string, last shardSeqs) (done int, delivered bool, err error) {
	for k, name := range streams {
		c, err := e.js.Consumer(ctx, name, durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			if last[k] == 0 {
				done++
			}
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("reading consumer %s on %s: %w", durable, name, err)
		}
		info := c.CachedInfo()
		delivered = delivered || info.Delivered.Stream > 0
		if info.AckFloor.Stream >= last[k] {
			done++
		}
	}
	return done, delivered, nil
}
