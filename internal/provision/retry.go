package provision

import (
	"context"
	"log/slog"
	"time"

	retrypolicy "github.com/recallhq/recall/pkg/retry"
)

// AttemptTimeout bounds one attempt of a start-up call (one stream or bucket
// created, one bucket opened, one watch started). A call that hangs — its
// request went to a node that is going away, or to one that just returned
// and is still catching up — is abandoned after this long and tried again,
// so a degraded cluster costs a service seconds at start, not a minute.
const AttemptTimeout = 5 * time.Second

// Backoff between attempts of Retry: it starts at minBackoff and doubles up
// to maxBackoff.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// Permanent marks err as one Retry must not retry (a configuration
// conflict, an invalid argument). Retry returns the unmarked error. It is
// retry.Permanent.
func Permanent(err error) error { return retrypolicy.Permanent(err) }

// Retry is the retry policy for start-up reads, watches and provisioning
// (pkg/retry with these waits): it calls attempt with a context
// bounded to AttemptTimeout until attempt returns nil or an error marked
// Permanent, waiting 250 ms, then twice as long each time, at most 5 s,
// between attempts. Failures are logged as warnings naming what (log may be
// nil). It returns ctx.Err() as soon as ctx is done: a retry never outlives
// its caller's context. It is safe for concurrent use.
func Retry(ctx context.Context, log *slog.Logger, what string, attempt func(context.Context) error) error {
	return startup(AttemptTimeout).Do(ctx, log, what, attempt)
}

// RetryWithin is Retry with another bound on one attempt, for attempts
// that legitimately take longer (a batch of publishes awaiting their
// acknowledgements, several calls each bounded by AttemptTimeout).
func RetryWithin(ctx context.Context, log *slog.Logger, what string, perAttempt time.Duration, attempt func(context.Context) error) error {
	return retry(ctx, log, what, perAttempt, attempt)
}

// retry is RetryWithin (provision.go's EnsureRetry calls it).
func retry(ctx context.Context, log *slog.Logger, what string, perAttempt time.Duration, attempt func(context.Context) error) error {
	return startup(perAttempt).Do(ctx, log, what, attempt)
}

// startup is Retry's policy with perAttempt as the bound of one attempt.
func startup(perAttempt time.Duration) retrypolicy.Policy {
	return retrypolicy.Policy{First: minBackoff, Max: maxBackoff, Attempt: perAttempt}
}
