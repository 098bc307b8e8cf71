package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// Client publishes one tenant's events. It is safe for concurrent use.
type Client struct {
	js      jetstream.JetStream
	tenant  string
	ordered bool
	// retryFor and attempt bound the retries of a publish (RetryFor,
	// AttemptTimeout).
	retryFor, attempt time.Duration

	mu     sync.Mutex
	layout events.Layout         // zero until known
	blobs  jetstream.ObjectStore // nil until the first claim check
}

// Option configures a Client.
type Option func(*Client)

// Ordered makes PublishBatch keep each session's events in order even when
// a publish fails mid-batch — for example while a stream leader changes —
// and the batch is retried: a session's events are published one after
// the other, the next once JetStream stored the previous, and a failure
// stops that session's remaining events (their results carry
// ErrNotAttempted), so that a retry of the batch stores them after it.
// Sessions still go concurrently. Without it a batch is pipelined: faster
// for one session's bulk, but a failed event retried later lands after the
// session's newer events that succeeded.
func Ordered() Option { return func(c *Client) { c.ordered = true } }

// Shards tells the client the transcript's shard count (RECALL_SHARDS), so
// it does not read it from the server before its first publish.
func Shards(n int) Option { return func(c *Client) { c.layout = events.NewLayout(n) } }

// ErrNotAttempted is the error of an event an Ordered batch did not
// publish because an earlier event of its session failed.
var ErrNotAttempted = errors.New("not published: an earlier event of the session failed")

// New returns a client publishing as tenant through js.
func New(js jetstream.JetStream, tenant string, opts ...Option) (*Client, error) {
	if err := events.ValidateID(tenant); err != nil {
		return nil, fmt.Errorf("tenant: %w", err)
	}
	c := &Client{js: js, tenant: tenant, retryFor: DefaultRetryFor, attempt: DefaultAttemptTimeout}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Result is the outcome of one published event.
type Result struct {
	// Seq is the transcript stream sequence the event is stored at.
	Seq uint64
	// Duplicate is true when the event id had been stored before; Seq is
	// then the original's sequence.
	Duplicate bool
	// Err is the validation or publish error, nil on success.
	Err error
}

// Msg validates e as an event of the client's tenant and encodes it as the
// NATS message to publish (binary mode, Nats-Msg-Id, trace context of ctx).
// An event over InlineBytes (up to MaxEventBytes) has its data stored in
// the events.BucketBlobs Object Store first, and the message is the stub
// naming it (see InlineBytes); an event over MaxEventBytes is an error
// wrapping events.ErrInvalidEvent.
func (c *Client) Msg(ctx context.Context, e event.Event) (*nats.Msg, error) {
	// Checked, not decoded: only a claim check needs the message.
	s, err := events.CheckIngest(e, c.tenant)
	if err != nil {
		return nil, err
	}
	layout, err := c.Layout(ctx)
	if err != nil {
		return nil, err
	}
	m, err := c.claimCheck(ctx, s, natsce.NewMsg(layout.Subject(c.tenant, s.Session), &s.Event))
	if err != nil {
		return nil, err
	}
	m.Header.Set(jetstream.MsgIDHeader, events.DedupID(c.tenant, e.ID()))
	natsce.Inject(ctx, m.Header)
	return m, nil
}

// Layout is the transcript's shard layout: the one given with Shards, or
// else read once from the first shard stream's metadata.
func (c *Client) Layout(ctx context.Context) (events.Layout, error) {
	c.mu.Lock()
	known := c.layout
	c.mu.Unlock()
	if known != (events.Layout{}) {
		return known, nil
	}
	// Concurrent first publishes may each read it: no I/O under the lock.
	name := events.TranscriptShardStream(0)
	st, err := c.js.Stream(ctx, name)
	if err != nil {
		return events.Layout{}, fmt.Errorf("reading the transcript's shard count from stream %s: %w", name, err)
	}
	n, err := strconv.Atoi(st.CachedInfo().Config.Metadata[events.ShardsMetadataKey])
	if err != nil || n <= 0 {
		return events.Layout{}, fmt.Errorf("stream %s does not record the transcript's shard count (%s)", name, events.ShardsMetadataKey)
	}
	c.mu.Lock()
	c.layout = events.NewLayout(n)
	c.mu.Unlock()
	return events.NewLayout(n), nil
}

// Publish stores one event and returns once JetStream acknowledged it,
// retrying as the client's RetryFor and AttemptTimeout say.
func (c *Client) Publish(ctx context.Context, e event.Event) (Result, error) {
	m, err := c.Msg(ctx, e)
	if err != nil {
		return Result{Err: err}, err
	}
	ack, err := c.publishRetrying(ctx, m)
	if err != nil {
		err = fmt.Errorf("publishing event %s: %w", e.ID(), err)
		return Result{Err: err}, err
	}
	return Result{Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// PublishBatch validates and publishes events asynchronously and waits for
// every acknowledgement. Results are in input order. Invalid events are not
// published and do not stop the valid ones; the error is non-nil when any
// event failed. An event whose acknowledgement does not come within
// AttemptTimeout, or whose publish failed retryably, is sent again once
// the others are settled (one at a time, as Publish retries): it lands
// after the session's newer events of the batch (Ordered keeps the order).
func (c *Client) PublishBatch(ctx context.Context, evs []event.Event) ([]Result, error) {
	if c.ordered {
		return c.publishOrdered(ctx, evs)
	}
	res := make([]Result, len(evs))
	msgs := make([]*nats.Msg, len(evs))
	futures := make([]jetstream.PubAckFuture, len(evs))
	for i, e := range evs {
		m, err := c.Msg(ctx, e)
		if err != nil {
			res[i].Err = err
			continue
		}
		msgs[i] = m
		if futures[i], err = c.publishAsync(ctx, m); err != nil {
			res[i].Err = fmt.Errorf("publishing event %s: %w", e.ID(), err)
		}
	}
	for _, i := range c.awaitAcks(ctx, futures, res) {
		res[i] = Result{}
		ack, err := c.publishRetrying(ctx, msgs[i])
		if err != nil {
			res[i].Err = fmt.Errorf("publishing event %s: %w", evs[i].ID(), err)
			continue
		}
		res[i] = Result{Seq: ack.Sequence, Duplicate: ack.Duplicate}
	}
	if failed := countFailed(res); failed > 0 {
		return res, fmt.Errorf("%d of %d events failed: %w", failed, len(evs), firstErr(res))
	}
	return res, nil
}

// awaitAcks completes res from futures, waiting at most AttemptTimeout for
// the acknowledgements still missing, and returns the events to send again:
// failed retryably or not acknowledged in time. With retries off (RetryFor
// 0) those fail instead.
func (c *Client) awaitAcks(ctx context.Context, futures []jetstream.PubAckFuture, res []Result) (resend []int) {
	timer := time.NewTimer(c.attempt)
	defer timer.Stop()
	expired := false
	for i, f := range futures {
		if f == nil {
			continue
		}
		var err error
		select {
		case ack := <-f.Ok():
			res[i] = Result{Seq: ack.Sequence, Duplicate: ack.Duplicate}
			continue
		case err = <-f.Err():
		case <-ctx.Done():
			err = ctx.Err()
		default:
			if expired {
				err = errNoAck
				break
			}
			select {
			case ack := <-f.Ok():
				res[i] = Result{Seq: ack.Sequence, Duplicate: ack.Duplicate}
				continue
			case err = <-f.Err():
			case <-ctx.Done():
				err = ctx.Err()
			case <-timer.C:
				expired, err = true, errNoAck
			}
		}
		res[i].Err = fmt.Errorf("publishing: %w", err)
		if c.retryFor > 0 && ctx.Err() == nil && retryable(err) {
			resend = append(resend, i)
		}
	}
	return resend
}

// errNoAck is the error of an event whose acknowledgement did not come
// within the attempt timeout.
var errNoAck = errors.New("no acknowledgement within the attempt timeout")

func countFailed(res []Result) int {
	n := 0
	for _, r := range res {
		if r.Err != nil {
			n++
		}
	}
	return n
}

// publishAsync publishes m without waiting for its acknowledgement. When
// the connection's window of unacknowledged publishes is full (the server
// is slower than the caller) it waits for room, bounded by ctx, instead of
// failing the event: a burst is slowed down, not partly lost.
func (c *Client) publishAsync(ctx context.Context, m *nats.Msg) (jetstream.PubAckFuture, error) {
	for {
		f, err := c.js.PublishMsgAsync(m)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
		select {
		case <-c.js.PublishAsyncComplete():
		case <-time.After(stallRetry):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w; gave up waiting for room: %w", err, ctx.Err())
		}
	}
}

// stallRetry is how often publishAsync retries while the window is full
// (each attempt itself waits for room for nats.go's stall wait).
const stallRetry = 10 * time.Millisecond

func firstErr(res []Result) error {
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// maxSessionsAtOnce bounds the sessions an Ordered batch publishes at once.
const maxSessionsAtOnce = 256

// publishOrdered publishes each session's events one after the other (see
// Ordered), sessions concurrently.
func (c *Client) publishOrdered(ctx context.Context, evs []event.Event) ([]Result, error) {
	res := make([]Result, len(evs))
	msgs := make([]*nats.Msg, len(evs))
	var order []string
	bySession := map[string][]int{}
	for i, e := range evs {
		m, err := c.Msg(ctx, e)
		if err != nil {
			res[i].Err = err
			continue
		}
		msgs[i] = m
		if _, ok := bySession[m.Subject]; !ok {
			order = append(order, m.Subject)
		}
		bySession[m.Subject] = append(bySession[m.Subject], i)
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxSessionsAtOnce)
	for _, subject := range order {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			failed := false
			for _, i := range bySession[subject] {
				if failed {
					res[i].Err = fmt.Errorf("publishing event %s: %w", evs[i].ID(), ErrNotAttempted)
					continue
				}
				ack, err := c.publishRetrying(ctx, msgs[i])
				if err != nil {
					res[i].Err = fmt.Errorf("publishing event %s: %w", evs[i].ID(), err)
					failed = true
					continue
				}
				res[i] = Result{Seq: ack.Sequence, Duplicate: ack.Duplicate}
			}
		})
	}
	wg.Wait()
	if failed := countFailed(res); failed > 0 {
		return res, fmt.Errorf("%d of %d events failed: %w", failed, len(evs), firstErr(res))
	}
	return res, nil
}
