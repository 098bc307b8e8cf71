package microapi

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Admission bounds the requests an endpoint works on at once: at most
// perKey for one key (a tenant) and global in all, so one tenant cannot
// take every slot. It never queues: a request over a bound is refused at
// once, with a Retry-After. It is safe for concurrent use; a nil
// *Admission admits everything.
type Admission struct {
	perKey, global int
	retryAfter     time.Duration

	mu    sync.Mutex
	total int
	by    map[string]int
}

// NewAdmission returns an Admission of perKey requests per key and global
// in all (a bound <= 0 is no bound); refusals ask the client to retry
// after retryAfter (at least a second).
func NewAdmission(perKey, global int, retryAfter time.Duration) *Admission {
	return &Admission{perKey: perKey, global: global, retryAfter: max(retryAfter, time.Second), by: map[string]int{}}
}

// Admit takes a slot for key. A key at its bound is refused with code 429
// (over its share; others are still served), a full service with 503;
// both refusals carry RetryAfter. On success release returns the slot:
// call it exactly once.
func (a *Admission) Admit(key string) (release func(), aerr *Error) {
	if a == nil {
		return func() {}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.perKey > 0 && a.by[key] >= a.perKey {
		return nil, &Error{Code: 429, RetryAfter: a.retryAfter,
			Msg: fmt.Sprintf("too many requests: %s has %d in flight, its share is %d; retry after %s", key, a.by[key], a.perKey, a.retryAfter)}
	}
	if a.global > 0 && a.total >= a.global {
		return nil, &Error{Code: 503, RetryAfter: a.retryAfter,
			Msg: fmt.Sprintf("busy: %d requests in flight, the most this replica takes; retry after %s", a.total, a.retryAfter)}
	}
	a.total++
	a.by[key]++
	var once sync.Once
	return func() { once.Do(func() { a.release(key) }) }, nil
}

func (a *Admission) release(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.total--
	if a.by[key]--; a.by[key] <= 0 {
		delete(a.by, key)
	}
}

// InFlight returns the requests admitted and not released, for key and in
// all.
func (a *Admission) InFlight(key string) (forKey, total int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.by[key], a.total
}

// The bounds of the answer-later read endpoints (session memory, long-term
// memory, index entries): one KV read each, so generous, but bounded per
// tenant so that one tenant's flood is refused with 429 at once instead of
// queueing every other tenant's reads behind it in micro's handler.
const (
	ReadsPerTenant = 16
	ReadsInAll     = 256
)

// NewReadAdmission returns the admission of one service's read endpoints.
func NewReadAdmission() *Admission { return NewAdmission(ReadsPerTenant, ReadsInAll, time.Second) }

// WithTimeout bounds h's work by d (DefaultTimeout when d is not
// positive): an answer-later endpoint has no Timeout of its own (that
// field bounds Quick endpoints).
func WithTimeout(d time.Duration, h Handler) Handler {
	if d <= 0 {
		d = DefaultTimeout
	}
	return func(ctx context.Context, r Request) (any, *Error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return h(ctx, r)
	}
}
