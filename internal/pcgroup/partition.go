package pcgroup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// runner is the fetch loop of one owned partition.
type runner struct {
	p    int
	stop chan struct{} // closed: stop fetching, drain
	// fetched is closed when the fetch loop returned: no pull request of
	// this runner that may take a message is open any more (handler mode).
	fetched chan struct{}
	done    chan struct{} // closed when the loop and its handlers returned

	// Keyed mode (Config.KeyOf): slots bounds the messages held, last is
	// the done channel of each key's newest message, handlers counts the
	// running handler goroutines.
	slots    chan struct{}
	mu       sync.Mutex
	last     map[string]chan struct{}
	handlers sync.WaitGroup
}

func (r *runner) stopping() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// consumerConfig is partition p's durable consumer.
func (g *Group) consumerConfig(p int) jetstream.ConsumerConfig {
	if g.cfg.Consumer != nil {
		return g.cfg.Consumer(p)
	}
	return jetstream.ConsumerConfig{
		Durable:        g.cfg.Durable(p),
		Description:    fmt.Sprintf("partition %d of %s", p, g.cfg.StreamOf(p)),
		FilterSubject:  g.cfg.Filter(p),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        g.cfg.AckWait,
		MaxAckPending:  g.cfg.InFlight,
		MaxDeliver:     -1,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{g.cfg.PriorityGroup},
		PinnedTTL:      g.cfg.PinnedTTL,
		// No InactiveThreshold: a durable must never be reaped while a
		// member is busy with its message.
	}
}

// runPartition fetches and handles partition r.p's messages until r.stop is
// closed, then drains and unpins.
func (g *Group) runPartition(hctx context.Context, stream jetstream.Stream, r *runner) {
	if g.cfg.Consume != nil {
		g.consumePartition(hctx, stream, r)
		return
	}
	defer close(r.done)
	// The handler's context ends DrainTimeout after the stop signal.
	hctx, cancel := context.WithCancel(hctx)
	defer cancel()
	go g.cancelAfterDrain(r, cancel)
	f := &fetcher{g: g, r: r, stream: stream, durable: g.cfg.Durable(r.p),
		log: g.log.With("member", g.cfg.Member, "partition", r.p), backoff: restartBackoff.Backoff()}
	for !r.stopping() && f.step(hctx) {
		// one fetch per step
	}
	close(r.fetched)
	// Every message this member holds is settled before the next owner can
	// be pinned, so a key's messages never run on two members at once, and
	// the ones handed back (at most one per key, see start) are queued for
	// redelivery, ahead of anything the next owner fetches.
	f.drain()
	// Unpin so the next owner is pinned now, not after PinnedTTL.
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(hctx), 2*time.Second)
	defer ucancel()
	if err := stream.UnpinConsumer(uctx, f.durable, g.cfg.PriorityGroup); err != nil {
		f.log.DebugContext(uctx, "unpinning", "durable", f.durable, "err", err)
	}
}

// cancelAfterDrain cancels the handlers' context DrainTimeout after r is
// told to stop, unless the loop is done first.
func (g *Group) cancelAfterDrain(r *runner, cancel context.CancelFunc) {
	select {
	case <-r.stop:
		t := time.NewTimer(g.cfg.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-r.done:
		}
	case <-r.done:
	}
}

// ensureConsumer returns partition p's durable, creating it with
// consumerConfig, or updating an existing one with it while keeping the
// existing deliver policy and start (they cannot change).
func (g *Group) ensureConsumer(ctx context.Context, stream jetstream.Stream, p int) (jetstream.Consumer, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	want := g.consumerConfig(p)
	c, err := stream.Consumer(cctx, want.Durable)
	if isGone(err) {
		return stream.CreateConsumer(cctx, want)
	}
	if err != nil {
		return nil, err
	}
	have := c.CachedInfo().Config
	want.DeliverPolicy, want.OptStartSeq, want.OptStartTime = have.DeliverPolicy, have.OptStartSeq, have.OptStartTime
	return stream.UpdateConsumer(cctx, want)
}

func isGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerDoesNotExist)
}
