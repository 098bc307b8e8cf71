package pcgroup

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/recallhq/recall/internal/retry"
)

// restartBackoff is the pause after a failed consumer creation or fetch
// (and before a failed Consume runs again): 100 ms, doubling up to 5 s; a
// fetch loop starts again at 100 ms after a good fetch.
var restartBackoff = retry.Policy{First: 100 * time.Millisecond, Max: 5 * time.Second}

// fetcher is the fetch loop of one partition in handler mode.
type fetcher struct {
	g       *Group
	r       *runner
	stream  jetstream.Stream
	durable string
	log     *slog.Logger
	cons    jetstream.Consumer
	backoff *retry.Backoff
}

// pause waits the next backoff; false when the partition is being stopped
// meanwhile.
func (f *fetcher) pause() bool {
	return retry.Pause(f.r.stop, f.backoff.Next())
}

// step makes sure the consumer exists, fetches one message and dispatches
// it; false when the loop must end.
func (f *fetcher) step(hctx context.Context) bool {
	g, r := f.g, f.r
	if f.cons == nil {
		cctx, ccancel := context.WithTimeout(hctx, 10*time.Second)
		c, err := f.stream.CreateOrUpdateConsumer(cctx, g.consumerConfig(r.p))
		ccancel()
		if err != nil {
			f.log.WarnContext(hctx, "creating partition consumer", "durable", f.durable, "err", err)
			return f.pause()
		}
		f.cons = c
	}
	if !g.takeSlot(r) {
		return false
	}
	batch, err := f.cons.Fetch(1, jetstream.FetchMaxWait(g.cfg.FetchWait), jetstream.FetchPriorityGroup(g.cfg.PriorityGroup))
	if err != nil {
		g.releaseSlot(r)
		if isGone(err) {
			f.cons = nil
		}
		f.log.WarnContext(hctx, "fetching", "durable", f.durable, "err", err)
		return f.pause()
	}
	got := false
	for m := range batch.Messages() {
		got = true
		if r.stopping() {
			// Lost the partition while the pull was open: hand the message
			// back at once for the next owner.
			_ = m.Nak()
			g.releaseSlot(r)
			continue
		}
		g.dispatch(hctx, r, m, f.log)
	}
	if !got {
		g.releaseSlot(r)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		if isGone(err) {
			f.cons = nil
		}
		if !errors.Is(err, jetstream.ErrPinIDMismatch) {
			f.log.WarnContext(hctx, "fetching", "durable", f.durable, "err", err)
			return f.pause()
		}
		return true
	}
	f.backoff.Reset()
	return true
}
