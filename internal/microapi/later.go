package microapi

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// CancelWait bounds how long Later.Stop waits for work it cancelled to
// answer.
const CancelWait = 2 * time.Second

// Later is the one way a Recall endpoint answers a request after its
// handler returned (a model call, a wait, work under a concurrency bound):
// Go admits the request (Admission, per tenant), runs the work in a
// goroutine under the service's run context with the caller's trace,
// answers a panic with 500, counts the answer and sends it on the reply
// subject; Stop, before the connection drains, waits for what is in
// flight. The reply-space guard stays at the handler (internal/replyspace
// wraps the endpoint), so Go only ever sees requests it may answer.
//
// Stats: micro times and counts a request when its handler returns, so
// for these endpoints its own num_requests and processing_time describe
// the admission only and num_errors misses every later refusal. Later's
// numbers appear in $SRV.STATS as the endpoint's data, under
// "answered_later", when the service is created with StatsHandler set to
// Later.Stats.
//
// Cancellation: work runs under a context with the values of the run
// context given to NewLater; it is cancelled grace after the run context
// ended (at once for a grace of 0), so in-flight work may finish and be
// answered while the service stops, and never outlives the service. A
// Later is safe for concurrent use.
type Later struct {
	nc     *nats.Conn
	log    *slog.Logger
	base   context.Context
	cancel context.CancelFunc
	grace  time.Duration
	expiry sync.Once

	mu      sync.Mutex
	by      map[string]*LaterStats
	running int  // admitted and not answered (the answer being sent included)
	sending int  // answers being sent
	closed  bool // Stop ended: nothing is admitted or sent any more
	changed chan struct{}
}

// LaterStats are one endpoint's requests answered later.
type LaterStats struct {
	NumRequests           uint64        `json:"num_requests"`
	NumErrors             uint64        `json:"num_errors"`
	LastError             string        `json:"last_error,omitempty"`
	InFlight              int64         `json:"in_flight"`
	ProcessingTime        time.Duration `json:"processing_time"`
	AverageProcessingTime time.Duration `json:"average_processing_time"`
}

// NewLater returns a Later answering on nc whose work runs under ctx, the
// service's run context: grace after ctx ends, the work still running is
// cancelled (see Stop).
func NewLater(ctx context.Context, nc *nats.Conn, log *slog.Logger, grace time.Duration) *Later {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Later{nc: nc, log: log, base: base, cancel: cancel, grace: grace, by: map[string]*LaterStats{}, changed: make(chan struct{})}
	context.AfterFunc(ctx, l.expire)
	return l
}

// expire starts the grace at whose end the work in flight is cancelled;
// later calls do nothing.
func (l *Later) expire() {
	l.expiry.Do(func() {
		if l.grace <= 0 {
			l.cancel()
			return
		}
		time.AfterFunc(l.grace, l.cancel)
	})
}

// Stop ends the answers in flight, before the connection they go out on
// drains: it waits until every admitted request was answered — for at most
// the grace (counted from the run context's end, or from now when it has
// not ended), then cancels their work and waits at most CancelWait more,
// never past ctx. Then it closes: an answer still pending is dropped (its
// requester times out rather than hearing from a stopped service) and
// requests handed to Go are refused with 503. Later calls return at once.
func (l *Later) Stop(ctx context.Context) {
	l.expire()
	if !l.await(ctx, l.base.Done(), func() bool { return l.running == 0 }) {
		l.log.Warn("cancelling requests still running at shutdown", "in_flight", l.inFlight(), "grace", l.grace)
	}
	l.cancel()
	cctx, cancel := context.WithTimeout(ctx, CancelWait)
	defer cancel()
	if !l.await(cctx, nil, func() bool { return l.running == 0 }) {
		l.log.Warn("requests did not answer after their cancellation; their answers are dropped", "in_flight", l.inFlight())
	}
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	// An answer that was being sent when Stop closed is let out.
	l.await(cctx, nil, func() bool { return l.sending == 0 })
}

// await waits until cond (read under l.mu) holds, ctx ends or stop is
// closed; it reports whether cond held.
func (l *Later) await(ctx context.Context, stop <-chan struct{}, cond func() bool) bool {
	for {
		l.mu.Lock()
		ok, changed := cond(), l.changed
		l.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// notify wakes the waiters of await; l.mu is held.
func (l *Later) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *Later) inFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

// enter counts an admitted request; false once Stop closed.
func (l *Later) enter() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.running++
	return true
}

// leave counts a request answered (or dropped).
func (l *Later) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running--
	l.notify()
}

// send calls answer unless Stop closed; it reports whether it did.
func (l *Later) send(answer func()) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.sending++
	l.mu.Unlock()
	answer()
	l.mu.Lock()
	l.sending--
	l.notify()
	l.mu.Unlock()
	return true
}

// begin records that endpoint took a request it will answer later; the
// returned function records the answer: code 0 for a success, otherwise
// the error code and description sent. It is called exactly once, before
// the answer is sent, so that a client holding the answer finds it counted.
func (l *Later) begin(endpoint string) (done func(aerr *Error)) {
	start := time.Now()
	l.mu.Lock()
	s := l.stats(endpoint)
	s.InFlight++
	l.mu.Unlock()
	return func(aerr *Error) {
		d := time.Since(start)
		l.mu.Lock()
		defer l.mu.Unlock()
		s.InFlight--
		s.NumRequests++
		s.ProcessingTime += d
		s.AverageProcessingTime = s.ProcessingTime / time.Duration(s.NumRequests)
		if aerr != nil {
			s.NumErrors++
			s.LastError = strconv.Itoa(aerr.Code) + ":" + aerr.Msg
		}
	}
}

// Snapshot returns endpoint's stats so far.
func (l *Later) Snapshot(endpoint string) LaterStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return *l.stats(endpoint)
}

// Stats is a micro.Config StatsHandler: the endpoint's data in $SRV.STATS.
func (l *Later) Stats(e *micro.Endpoint) any {
	return struct {
		AnsweredLater LaterStats `json:"answered_later"`
	}{l.Snapshot(e.Name)}
}

func (l *Later) stats(endpoint string) *LaterStats {
	s := l.by[endpoint]
	if s == nil {
		s = &LaterStats{}
		l.by[endpoint] = s
	}
	return s
}
