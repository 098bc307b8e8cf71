package llm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/recallhq/recall/pkg/retry"
)

// RetryPolicy bounds the retries of transient provider errors.
type RetryPolicy struct {
	// Attempts is the total number of calls (1 disables retries; <= 0 means
	// 4).
	Attempts int
	// BaseDelay is the delay before the second call (<= 0: 500ms); it
	// doubles per attempt up to MaxDelay (<= 0: 20s). Each delay is spread
	// over [delay/2, 3·delay/2) (pkg/retry's jitter).
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// OnRetry, when set, is called before each retry with the attempt that
	// failed (1-based) and its error.
	OnRetry func(attempt int, err error)
}

// AttemptsError is returned when every attempt failed with a retryable
// error. It wraps the last error (so errors.Is(err, ErrRetryable) holds).
type AttemptsError struct {
	Attempts int
	Err      error
}

func (e *AttemptsError) Error() string {
	return fmt.Sprintf("giving up after %d attempts: %v", e.Attempts, e.Err)
}

func (e *AttemptsError) Unwrap() error { return e.Err }

type retrying struct {
	Provider
	policy RetryPolicy
}

// WithRetry returns p retrying calls that fail with ErrRetryable, with
// bounded exponential backoff and jitter. Other errors return at once. When
// every attempt fails, the error is an *AttemptsError wrapping the last one.
// Cancelling ctx stops waiting and returns ctx's error.
func WithRetry(p Provider, policy RetryPolicy) Provider {
	if policy.Attempts <= 0 {
		policy.Attempts = 4
	}
	if policy.BaseDelay <= 0 {
		policy.BaseDelay = 500 * time.Millisecond
	}
	if policy.MaxDelay <= 0 {
		policy.MaxDelay = 20 * time.Second
	}
	return &retrying{Provider: p, policy: policy}
}

// Complete implements Provider.
func (r *retrying) Complete(ctx context.Context, req Request) (*Response, error) {
	waits := retry.Policy{First: r.policy.BaseDelay, Max: r.policy.MaxDelay, Jitter: true}.Backoff()
	for attempt := 1; ; attempt++ {
		resp, err := r.Provider.Complete(ctx, req)
		if err == nil || !errors.Is(err, ErrRetryable) {
			return resp, err
		}
		if attempt >= r.policy.Attempts {
			return nil, &AttemptsError{Attempts: attempt, Err: err}
		}
		if r.policy.OnRetry != nil {
			r.policy.OnRetry(attempt, err)
		}
		if !retry.Pause(ctx.Done(), waits.Next()) {
			return nil, fmt.Errorf("waiting to retry: %w", ctx.Err())
		}
	}
}
