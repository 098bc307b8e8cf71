package provision

import (
	"context"
	"errors"
	"log/slog"
	"time"
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

// permanentError marks an error retrying cannot fix.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as one Retry must not retry (a configuration
// conflict, an invalid argument). Retry returns the unmarked error.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// Retry is Recall's one retry policy for start-up reads, watches and
// provisioning: it calls attempt with a context bounded to AttemptTimeout
// until attempt returns nil or an error marked Permanent, waiting 250 ms,
// then twice as long each time, at most 5 s, between attempts. Failures are
// logged as warnings naming what (log may be nil). It returns ctx.Err() as
// soon as ctx is done: a retry never outlives its caller's context. It is
// safe for concurrent use.
func Retry(ctx context.Context, log *slog.Logger, what string, attempt func(context.Context) error) error {
	return retry(ctx, log, what, AttemptTimeout, attempt)
}

// RetryWithin is Retry with another bound on one attempt, for attempts
// that legitimately take longer (a batch of publishes awaiting their
// acknowledgements, several calls each bounded by AttemptTimeout).
func RetryWithin(ctx context.Context, log *slog.Logger, what string, perAttempt time.Duration, attempt func(context.Context) error) error {
	return retry(ctx, log, what, perAttempt, attempt)
}

func retry(ctx context.Context, log *slog.Logger, what string, perAttempt time.Duration, attempt func(context.Context) error) error {
	wait := minBackoff
	for {
		actx, cancel := context.WithTimeout(ctx, perAttempt)
		err := attempt(actx)
		cancel()
		if err == nil {
			return nil
		}
		var p permanentError
		if errors.As(err, &p) {
			return p.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if log != nil {
			log.WarnContext(ctx, what+" failed; retrying", "err", err, "in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}
