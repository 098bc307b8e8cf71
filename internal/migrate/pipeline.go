package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackTimeout bounds the wait for one publish acknowledgement.
const ackTimeout = 30 * time.Second

// inflight is a publish waiting for its acknowledgement.
type inflight struct {
	f      jetstream.PubAckFuture
	legacy uint64
}

// pipeline publishes copies asynchronously, at most max unacknowledged,
// and settles them in publish order: the floor is the legacy sequence up
// to which every record is known to be stored (or needed no copy). It is
// used by one goroutine.
type pipeline struct {
	js   jetstream.JetStream
	max  int
	q    []inflight // q[head:] are unsettled, oldest first
	head int
	seen uint64 // newest legacy sequence handled
}

// floor is the highest legacy sequence at or below which every record is
// in its shard.
func (p *pipeline) floor() uint64 {
	if p.head == len(p.q) {
		return p.seen
	}
	return p.q[p.head].legacy - 1
}

// skip records that legacy needs no copy.
func (p *pipeline) skip(ctx context.Context, legacy uint64) error {
	p.seen = legacy
	return p.settle(ctx, false)
}

// publish sends msg, the copy of legacy, once fewer than max publishes
// are unsettled. An error is a pubError (or ctx's).
func (p *pipeline) publish(ctx context.Context, msg *nats.Msg, legacy uint64) error {
	if err := p.settle(ctx, false); err != nil {
		return err
	}
	for len(p.q)-p.head >= p.max {
		if err := p.settle(ctx, true); err != nil {
			return err
		}
	}
	f, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		return &pubError{legacy: legacy, err: err}
	}
	if p.head > 4096 && p.head*2 > len(p.q) {
		p.q = append(p.q[:0], p.q[p.head:]...)
		p.head = 0
	}
	p.q = append(p.q, inflight{f: f, legacy: legacy})
	p.seen = legacy
	return nil
}

// settle takes the acknowledgements that arrived, in order; with block it
// first waits for the oldest one.
func (p *pipeline) settle(ctx context.Context, block bool) error {
	for p.head < len(p.q) {
		h := p.q[p.head]
		var ack *jetstream.PubAck
		var err error
		if block {
			ack, err = wait(ctx, h.f)
			block = false
		} else {
			select {
			case ack = <-h.f.Ok():
			case err = <-h.f.Err():
			default:
				return nil
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &pubError{legacy: h.legacy, err: err}
		}
		if ack.Duplicate {
			return &pubError{legacy: h.legacy, duplicate: true, err: fmt.Errorf("the shard took it for a duplicate of its record %d (same Nats-Msg-Id)", ack.Sequence)}
		}
		p.head++
	}
	return nil
}

// wait waits for f's acknowledgement, up to ackTimeout.
func wait(ctx context.Context, f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	t := time.NewTimer(ackTimeout)
	defer t.Stop()
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		return nil, err
	case <-t.C:
		return nil, errors.New("no acknowledgement")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain waits for every unsettled publish.
func (p *pipeline) drain(ctx context.Context) error {
	for p.head < len(p.q) {
		if err := p.settle(ctx, true); err != nil {
			return p.abandon(ctx, err)
		}
	}
	return nil
}

// abandon ends an attempt with err: unless err is a simulated kill, it
// waits (briefly) until the server answered every publish, so the next
// attempt reads the shards after them.
func (p *pipeline) abandon(ctx context.Context, err error) error {
	var pe *pubError
	if !errors.As(err, &pe) {
		return err
	}
	t := time.NewTimer(ackTimeout)
	defer t.Stop()
	select {
	case <-p.js.PublishAsyncComplete():
	case <-t.C:
	case <-ctx.Done():
	}
	return err
}
