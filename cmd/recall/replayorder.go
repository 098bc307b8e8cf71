package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/retry"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// errRetryable marks failures worth retrying (the event ids make retries
// safe).
var errRetryable = errors.New("temporarily unavailable")

// sendFunc publishes a batch and returns one result per event.
type sendFunc func(context.Context, []event.Event) ([]ingestsvc.EventResult, error)

// replayer publishes a session's events so that they are stored in order.
// Batches go out while every event is acknowledged. When an event of a
// batch is answered 503 (JetStream did not store it in time) or 504, the
// events from it on are sent one per request, each retried until it is
// stored, before batching resumes: a later event is never sent before an
// earlier one is stored. What it cannot change: events of the same batch
// after the failed one that the ingest stored anyway are stored before it;
// they are counted in replayStats.reordered.
type replayer struct {
	send     sendFunc
	batch    int           // events per request while all goes well
	retryFor time.Duration // how long one request is retried before replay stops
	// attempt bounds one attempt of a request (see attemptTimeout): a
	// reply that has not come by then is taken as lost and the request
	// is sent again, with the same event ids.
	attempt  time.Duration
	log      *slog.Logger // retry warnings
	progress func(done int)
}

// notStoredError is the error of a replay that stopped at an event it
// could not store; the events from Next on were not (knowingly) stored.
type notStoredError struct {
	Next, Total int
	ID          string
	Err         error
}

func (e *notStoredError) Error() string {
	return fmt.Sprintf("could not store event %d of %d (id %s): %v; events %d-%d were not stored — run the same replay again to store them in order (event ids make re-sending safe)",
		e.Next+1, e.Total, e.ID, e.Err, e.Next+1, e.Total)
}

func (e *notStoredError) Unwrap() error { return e.Err }

// run publishes evs in order. It returns the statistics so far and, when
// it stopped early, a *notStoredError (or ctx.Err()).
func (r *replayer) run(ctx context.Context, evs []event.Event) (*replayStats, error) {
	st := &replayStats{counted: map[int]bool{}}
	careful := 0 // events still to send one per request
	for start := 0; start < len(evs); {
		n := r.batch
		if careful > 0 {
			n = 1
		}
		end := nextBatch(evs, start, n, 4<<20)
		batch := evs[start:end]
		results, attempts, err := r.sendRetrying(ctx, batch, start)
		st.resent += attempts - 1
		if err != nil {
			if ctx.Err() != nil {
				return st, ctx.Err()
			}
			return st, &notStoredError{Next: start, Total: len(evs), ID: evs[start].ID(), Err: err}
		}
		first := firstRetryable(results)
		if first < 0 {
			st.add(results, batch, start)
			careful = max(careful-len(batch), 0)
			start = end
			r.progress(start)
			continue
		}
		// Keep what is settled before the failed event; resend from it,
		// one event at a time.
		st.add(results[:first], batch, start)
		for i, res := range results[first+1:] {
			if res.Accepted() && !res.Duplicate && !st.counted[start+first+1+i] {
				st.reordered++
			}
		}
		st.retried++
		start += first
		careful = r.batch
	}
	return st, nil
}

// sendRetrying sends batch (the events from offset on) and retries, with
// provision.Startup's backoff for up to retryFor, each attempt bounded by
// r.attempt, while the whole request fails retryably — no reply in time
// included — and, for a single event, while that event is answered 503 or
// 504. Other failures (401, 400 …) return at once. Results are indexed like
// batch; attempts is how often the request was sent.
func (r *replayer) sendRetrying(ctx context.Context, batch []event.Event, offset int) (results []ingestsvc.EventResult, attempts int, err error) {
	rctx, cancel := context.WithTimeout(ctx, r.retryFor)
	defer cancel()
	var last error
	what := fmt.Sprintf("sending events %d-%d", offset+1, offset+len(batch))
	p := provision.Startup
	p.Attempt = attemptTimeout(r.attempt, r.retryFor)
	err = p.Do(rctx, r.log, what, func(actx context.Context) error {
		attempts++
		res, err := r.send(actx, batch)
		switch {
		case err != nil && !errors.Is(err, errRetryable):
			return retry.Permanent(err)
		case err != nil:
			last = err
			return err
		}
		results = byIndex(res, len(batch))
		if len(batch) == 1 && retryableStatus(results[0].Status) {
			last = fmt.Errorf("%w: %d %s", errRetryable, results[0].Status, results[0].Error)
			return last
		}
		return nil
	})
	if err != nil && ctx.Err() == nil && rctx.Err() != nil && last != nil {
		err = fmt.Errorf("retried for %v (%d attempts): %w", r.retryFor, attempts, last)
	}
	return results, attempts, err
}

// defaultAttemptTimeout bounds one attempt of a replay request unless
// --attempt-timeout says otherwise: longer than the ingest takes to answer
// a request whose events JetStream is slow to acknowledge (its publish
// timeout, RECALL_INGEST_PUBLISH_TIMEOUT, 10 s by default), much shorter
// than the retry window.
const defaultAttemptTimeout = 15 * time.Second

// attemptTimeout is the bound of one attempt: d (defaultAttemptTimeout
// when 0), at most a third of the retry window, so that a lost reply is
// resent at least twice before replay gives up.
func attemptTimeout(d, retryFor time.Duration) time.Duration {
	if d <= 0 {
		d = defaultAttemptTimeout
	}
	return max(min(d, retryFor/3), time.Millisecond)
}

// byIndex orders results by their Index; events without a result get a
// 503 (unknown outcome: send again).
func byIndex(res []ingestsvc.EventResult, n int) []ingestsvc.EventResult {
	out := make([]ingestsvc.EventResult, n)
	for i := range out {
		out[i] = ingestsvc.EventResult{Index: i, Status: http.StatusServiceUnavailable, Error: "no result for this event"}
	}
	for _, r := range res {
		if r.Index >= 0 && r.Index < n {
			out[r.Index] = r
		}
	}
	return out
}

func retryableStatus(status int) bool {
	return status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout || status == http.StatusBadGateway
}

// firstRetryable is the index of the first result that failed retryably,
// or -1.
func firstRetryable(results []ingestsvc.EventResult) int {
	for i, r := range results {
		if retryableStatus(r.Status) {
			return i
		}
	}
	return -1
}

// unreachableError is a request nothing answered (connection refused, no
// responders). It is retryable once the ingest has answered a request — a
// restart — and permanent before: nothing is listening where replay was
// pointed, and retrying would only hide that.
type unreachableError struct {
	err   error
	first bool // no request had been answered yet
}

func (e *unreachableError) Error() string { return "nothing answers: " + e.err.Error() }

func (e *unreachableError) Unwrap() error {
	if e.first {
		return e.err
	}
	return errors.Join(errRetryable, e.err)
}

// failUntilReached returns send whose unreachableErrors are permanent
// (first set) until a request has been answered, and retryable after.
func failUntilReached(send sendFunc) sendFunc {
	var reached atomic.Bool
	return func(ctx context.Context, batch []event.Event) ([]ingestsvc.EventResult, error) {
		res, err := send(ctx, batch)
		var ue *unreachableError
		if errors.As(err, &ue) {
			ue.first = !reached.Load()
			return res, err
		}
		reached.Store(true)
		return res, err
	}
}
