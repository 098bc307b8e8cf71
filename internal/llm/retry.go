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
	// over [delay/2, 3·delay/2) (pkg/retry's jitter). An answer that asks
	// for a wait (Retry-After, retry-after-ms) is waited instead, at most
	// MaxDelay.
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

// WithRetry returns p retrying calls that fail with ErrRetryable, on
// pkg/retry's policy: bounded exponential backoff with jitter, or the wait
// the provider's answer asks for (at most MaxDelay). Other errors return
// at once. When every attempt fails, the error is an *AttemptsError
// wrapping the last one. Cancelling ctx stops waiting and returns ctx's
// error.
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
	p := retry.Policy{First: r.policy.BaseDelay, Max: r.policy.MaxDelay, Jitter: true, Attempts: r.policy.Attempts}
	var resp *Response
	var last error // the last retryable failure
	attempts, settled := 0, false
	err := p.Do(ctx, nil, "", func(ctx context.Context) error {
		attempts++
		var err error
		resp, err = r.Provider.Complete(ctx, req)
		if err == nil || !errors.Is(err, ErrRetryable) {
			settled = true
			return retry.Permanent(err)
		}
		last = err
		if attempts < r.policy.Attempts && r.policy.OnRetry != nil {
			r.policy.OnRetry(attempts, err)
		}
		if d := retry.WaitOf(err); d > 0 {
			return retry.Wait(err, min(d, r.policy.MaxDelay))
		}
		return err
	})
	switch {
	case settled:
		return resp, err
	case attempts >= r.policy.Attempts:
		return nil, &AttemptsError{Attempts: attempts, Err: last}
	}
	return nil, fmt.Errorf("waiting to retry: %w", err)
}
