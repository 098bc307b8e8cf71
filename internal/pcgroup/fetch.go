package pcgroup

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/recallhq/recall/pkg/retry"
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
	if !f.takeSlot() {
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
		// A message that comes after the partition was lost (the pull was
		// open) is dispatched too: handle runs it or hands it back in its
		// key's order (a nak now could overtake an earlier message of its
		// key that this member still holds).
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

// takeSlot waits for a free message slot of r in keyed mode (always true
// otherwise), renewing the pin meanwhile; false when r stops first.
func (f *fetcher) takeSlot() bool {
	g, r := f.g, f.r
	if g.cfg.KeyOf == nil {
		return true
	}
	select {
	case r.slots <- struct{}{}:
		return true
	default:
	}
	t := time.NewTicker(g.cfg.PinnedTTL / 4)
	defer t.Stop()
	for {
		select {
		case r.slots <- struct{}{}:
			return true
		case <-r.stop:
			return false
		case <-t.C:
			f.renewPin()
		}
	}
}

// drain waits for r's handlers after the fetch loop ended, renewing the
// pin meanwhile.
func (f *fetcher) drain() {
	done := make(chan struct{})
	go func() {
		f.r.handlers.Wait()
		close(done)
	}()
	t := time.NewTicker(f.g.cfg.PinnedTTL / 4)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			f.renewPin()
		}
	}
}

// renewPin keeps this member pinned while it does not fetch (its slots are
// busy, or it drains a lost partition): the server pins another member's
// pull request PinnedTTL after this member's last one, and that member
// could then start a key's later message while this one still holds an
// earlier one. The request renews the pin when it arrives and takes no
// message: none fits in one byte, and the server leaves a message that
// does not fit for the next request. (Without KeyOf the consumer lets one
// message out at a time, so a lapsed pin gives nothing away.)
func (f *fetcher) renewPin() {
	if f.cons == nil {
		return
	}
	_, err := f.cons.Fetch(1, jetstream.FetchMaxBytes(1), jetstream.FetchMaxWait(min(f.g.cfg.FetchWait, time.Second)),
		jetstream.FetchPriorityGroup(f.g.cfg.PriorityGroup))
	if err != nil {
		f.log.Debug("renewing the pin", "durable", f.durable, "err", err)
	}
}
