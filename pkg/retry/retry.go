// Package retry is Recall's one retry policy: call an attempt until it
// succeeds, waiting a growing, bounded backoff between failures, and never
// outlive the caller's context (STYLE 12). Every retry loop of the
// services, the internal packages and the public clients (pkg/client) goes
// through it: Policy.Do for "call until it works", Backoff and Pause for
// loops of another shape (a fetch loop that resets its backoff after a good
// fetch, a prober, a consumer restarted by a group, a client that retries
// only some answers). It is public so that pkg/client can share it with
// the services.
//
// What it does not do: it never gives up on its own (only Attempts, a Permanent error
// or the end of ctx stop it; a deadline on ctx is the caller's way to bound
// the whole retry), and it does not decide which errors are worth retrying
// beyond Permanent.
package retry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Policy says how Do retries and how a Backoff grows. The zero Policy
// retries at once, forever; set First and Max.
type Policy struct {
	// First is the wait after the first failure; it doubles after every
	// further failure, up to Max (Max >= First).
	First, Max time.Duration
	// Attempt bounds one attempt of Do: the attempt's context ends this
	// long after it started, and never with the caller's context: when
	// less than twice Attempt remains of it, the attempt gets half of what
	// remains (at least 100 ms), so that an attempt whose answer is lost
	// leaves time for another. 0: only the caller's context bounds it.
	Attempt time.Duration
	// Attempts, when above 0, bounds the attempts of Do: after that many
	// failures it returns the last error. 0: until ctx ends.
	Attempts int
	// LogEvery: Do logs the first failure and then every LogEvery-th (1,
	// 11, 21… for 10); 0 or 1 logs every failure.
	LogEvery int
	// Jitter spreads every wait w over [w/2, 3w/2), so that members that
	// failed together do not retry together.
	Jitter bool
}

// permanentError marks an error retrying cannot fix.
type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as one Do must not retry (a configuration conflict,
// an invalid argument). Do returns the unmarked error. Permanent(nil) is
// nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// waitError asks for a given wait before the next attempt.
type waitError struct {
	err  error
	wait time.Duration
}

func (w waitError) Error() string { return w.err.Error() }
func (w waitError) Unwrap() error { return w.err }

// Wait marks err as a failure after which Do waits d (a server's
// Retry-After) instead of its backoff. Wait(nil, d) is nil.
func Wait(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return waitError{err, d}
}

// WaitOf is the wait err asks for through Wait (the outermost one), 0
// when it asks for none: for a caller that bounds a server's wait before
// marking it again.
func WaitOf(err error) time.Duration {
	var we waitError
	if errors.As(err, &we) {
		return we.wait
	}
	return 0
}

// Do calls attempt until it returns nil or an error marked Permanent, or
// p.Attempts attempts failed, waiting p's backoff (or the wait an error
// asks for, see Wait) between attempts, each attempt with a context
// bounded by p.Attempt. Failures are logged as warnings naming what (log
// may be nil). It returns nil on success, the unmarked error of a
// Permanent failure, the last error after p.Attempts failures, and
// ctx.Err() as soon as ctx is done — while waiting, or when an attempt
// failed after ctx ended: a retry never outlives its caller's context. It
// is safe for concurrent use (a Policy is a value).
func (p Policy) Do(ctx context.Context, log *slog.Logger, what string, attempt func(context.Context) error) error {
	b := p.Backoff()
	for n := 1; ; n++ {
		err := p.try(ctx, attempt)
		if err == nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return perm.err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p.Attempts > 0 && n >= p.Attempts {
			return err
		}
		wait := b.Next()
		var we waitError
		if errors.As(err, &we) {
			wait = we.wait
		}
		if log != nil && (p.LogEvery <= 1 || n%p.LogEvery == 1) {
			log.WarnContext(ctx, what+" failed; retrying", "attempt", n, "err", err, "in", wait)
		}
		if !Pause(ctx.Done(), wait) {
			return ctx.Err()
		}
	}
}

// try runs one attempt under p.Attempt.
func (p Policy) try(ctx context.Context, attempt func(context.Context) error) error {
	if p.Attempt <= 0 {
		return attempt(ctx)
	}
	d := p.Attempt
	if dl, ok := ctx.Deadline(); ok {
		if rest := time.Until(dl); rest < 2*d {
			d = max(rest/2, min(rest, 100*time.Millisecond))
		}
	}
	actx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return attempt(actx)
}

// Backoff is the sequence of waits of one retry loop under a Policy. It is
// not safe for concurrent use: each loop has its own.
type Backoff struct {
	p    Policy
	next time.Duration // 0: First
}

// Backoff returns a new sequence of waits under p.
func (p Policy) Backoff() *Backoff { return &Backoff{p: p} }

// Next returns the wait after one more failure — First, then twice the
// previous one, at most Max, spread when Policy.Jitter is set.
func (b *Backoff) Next() time.Duration {
	w := b.next
	if w <= 0 {
		w = b.p.First
	}
	b.next = min(2*w, b.p.Max)
	if b.p.Jitter && w > 0 {
		return w/2 + rand.N(w)
	}
	return w
}

// After is the wait after the n-th failure (n >= 1) without jitter:
// First doubled n-1 times, at most Max. For a loop whose failures are
// counted elsewhere — a redelivered message's delivery count, say — and
// which therefore cannot keep a Backoff.
func (p Policy) After(n int) time.Duration {
	w := p.First
	for i := 1; i < n && w < p.Max; i++ {
		w *= 2
	}
	return min(w, p.Max)
}

// Reset starts the sequence again at First (after a success).
func (b *Backoff) Reset() { b.next = 0 }

// Pause waits d, or less when stop is closed first (ctx.Done() for a
// context). It reports whether the whole wait passed: false means stop.
func Pause(stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	}
}
