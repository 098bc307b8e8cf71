package microapi

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
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

// Work is an endpoint's work for one request answered later: its reply or
// its refusal.
type Work func(ctx context.Context) (any, *Error)

// Go answers req later under adm: a refusal by adm (key over its share,
// the service full) is answered at once through req, so micro counts it;
// an admitted request runs work in a goroutine with ctx — the caller's
// base context (the service's lifetime) with the request's trace; work
// sets its own deadline — and its answer is counted under endpoint and
// sent on the reply subject. The slot is released before the answer goes
// out, so a client's next request finds it free. A panic in work answers
// 500. wg, when not nil, tracks the goroutine (a shutdown waits on it).
func (l *Later) Go(ctx context.Context, nc *nats.Conn, log *slog.Logger, req micro.Request, endpoint string, adm *Admission, key string, wg *sync.WaitGroup, work Work) {
	release, aerr := adm.Admit(key)
	if aerr != nil {
		CountRejected(ctx, endpoint, key, aerr)
		Answer(nc, log, req.Reply(), nil, aerr, req)
		return
	}
	reply, done := req.Reply(), l.Begin(endpoint)
	if wg != nil {
		wg.Add(1)
	}
	go func() {
		if wg != nil {
			defer wg.Done()
		}
		res, aerr := run(ctx, log, endpoint, work)
		release()
		Done(done, aerr) // counted before it goes out
		Answer(nc, log, reply, res, aerr, nil)
	}()
}

// run calls work, turning a panic into a 500.
func run(ctx context.Context, log *slog.Logger, endpoint string, work Work) (res any, aerr *Error) {
	defer func() {
		if v := recover(); v != nil {
			log.ErrorContext(ctx, endpoint+" panicked", "panic", v, "stack", string(debug.Stack()))
			res, aerr = nil, Fail(500, "internal error (%s); see the service's log", endpoint)
		}
	}()
	return work(ctx)
}

// retryAfterHeader is the header a refusal's RetryAfter travels in (whole
// seconds, as HTTP's Retry-After).
const retryAfterHeader = "Retry-After"

func setRetryAfter(hdr nats.Header, d time.Duration) {
	if d > 0 {
		hdr.Set(retryAfterHeader, RetryAfter(d))
	}
}
