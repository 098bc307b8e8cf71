package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/retry"
)

// Defaults of the client's retries (see RetryFor and AttemptTimeout).
const (
	// DefaultRetryFor is how long a publish is retried when ctx has no
	// earlier deadline.
	DefaultRetryFor = 2 * time.Minute
	// DefaultAttemptTimeout bounds the wait for one acknowledgement: a
	// JetStream stream answers in milliseconds, or after a leader change
	// within seconds; an ack not there by then is taken as lost.
	DefaultAttemptTimeout = 5 * time.Second
)

// RetryFor bounds how long a publish that failed retryably — no
// acknowledgement in time (lost with a node), no stream responding during
// a leader election, the connection reconnecting — is sent again, with the
// same Nats-Msg-Id so JetStream stores it once (DefaultRetryFor; ctx's
// deadline, when earlier, wins). 0 disables retries: one attempt.
func RetryFor(d time.Duration) Option { return func(c *Client) { c.retryFor = d } }

// AttemptTimeout bounds one attempt of a publish (DefaultAttemptTimeout);
// keep it well below the retry window so a lost acknowledgement is resent
// before the window ends.
func AttemptTimeout(d time.Duration) Option { return func(c *Client) { c.attempt = d } }

// publishPolicy is the client's retry policy: one attempt bounded by
// c.attempt, 100 ms doubling to 2 s between attempts, jittered so that
// clients that failed together do not retry together.
func (c *Client) publishPolicy() retry.Policy {
	return retry.Policy{First: 100 * time.Millisecond, Max: 2 * time.Second, Attempt: c.attempt, Jitter: true}
}

// publishRetrying publishes m and waits for its acknowledgement, sending
// it again while it fails retryably, for up to c.retryFor (bounded by ctx).
// An error names the last attempt's failure.
func (c *Client) publishRetrying(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	if c.retryFor <= 0 {
		actx, cancel := context.WithTimeout(ctx, c.attempt)
		defer cancel()
		return c.js.PublishMsg(actx, m)
	}
	rctx, cancel := context.WithTimeout(ctx, c.retryFor)
	defer cancel()
	var ack *jetstream.PubAck
	var last error
	attempts := 0
	err := c.publishPolicy().Do(rctx, nil, "publishing", func(actx context.Context) error {
		attempts++
		a, err := c.js.PublishMsg(actx, m)
		if err != nil {
			last = err
			if !retryable(err) {
				return retry.Permanent(err)
			}
			return err
		}
		ack = a
		return nil
	})
	if err != nil && last != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%w (after %d attempts in %v)", last, attempts, c.retryFor)
	}
	return ack, err
}

// retryable reports whether sending the same message again may succeed:
// everything but a message the server can never take or a closed
// connection.
func retryable(err error) bool {
	switch {
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrBadSubject), errors.Is(err, jetstream.ErrInvalidStreamName):
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500 && apiErr.Code != 408 {
		return false
	}
	return true
}
