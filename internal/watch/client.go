package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/retry"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// DefaultURL is Recall's HTTP edge when none is configured.
const DefaultURL = "http://127.0.0.1:8080"

// errSplit is a batch refused whole: send its events one by one.
var errSplit = errors.New("batch refused whole")

// transientError marks a failure worth retrying: no answer, 429, 5xx.
type transientError struct{ error }

func (e transientError) Unwrap() error { return e.error }

// transientf is a transient error formatted as fmt.Errorf does.
func transientf(format string, args ...any) error {
	return transientError{fmt.Errorf(format, args...)}
}

func isTransient(err error) bool {
	var t transientError
	return errors.As(err, &t)
}

// Outcome sums how the events of a Send were settled.
type Outcome struct {
	Stored, Duplicates int
	// Rejected are the events Recall refused for good (a 4xx result):
	// reported, not retried.
	Rejected []ingestsvc.EventResult
}

// Client posts events to Recall's HTTP edge (POST /v1/events, batch mode).
// It is safe for concurrent use.
type Client struct {
	// URL is the edge's base URL (DefaultURL when empty); Token its bearer
	// token (none in open mode).
	URL, Token string
	// HTTP sends the requests; nil uses a client with a 60 s timeout.
	HTTP *http.Client
	// Batch is the most events per request (100 when 0); requests also
	// stay around 4 MiB.
	Batch int
	// Retry paces retries after a failure without Retry-After; the zero
	// value waits 250 ms doubling to 10 s.
	Retry retry.Policy
	// Attempts, when above 0, bounds the failed attempts in a row before
	// Send gives up (a hook that must not wait for a Recall that is down);
	// 0 retries until ctx ends.
	Attempts int
	// OnError, when set, is told every failed attempt (for a status line).
	OnError func(error)
}

// Send posts evs in order and returns once every event is settled: stored
// (202, also as a duplicate) or rejected for good (400/403/413…, in
// Outcome.Rejected). An unanswered request, 429, 5xx and per-event 503 are
// retried — from the first unsettled event, in order, waiting Retry-After
// when given — until ctx ends (or Attempts failures in a row); then Send
// returns the error with the outcome so far. A batch refused whole (400,
// 413, 415 without per-event results: a body over the edge's limit) is sent
// again one event at a time, and a single event refused so is rejected. A
// request-level failure no event can fix (401, 403) is returned at once.
// Events before a failure may be stored: sending them again is safe, their
// ids deduplicate.
func (c *Client) Send(ctx context.Context, evs []event.Event) (Outcome, error) {
	var out Outcome
	b := c.policy().Backoff()
	failed, single := 0, 0 // events before single go one per request
	for start := 0; start < len(evs); {
		end := batchEnd(evs, start, c.batch())
		if start < single {
			end = start + 1
		}
		results, wait, err := c.post(ctx, evs[start:end])
		if errors.Is(err, errSplit) {
			single = end
			continue
		}
		if err == nil {
			var done int
			done, err = settle(&out, results, end-start)
			if done > 0 {
				b.Reset()
				failed = 0
			}
			start += done
		}
		if err == nil {
			continue
		}
		if !isTransient(err) {
			return out, err
		}
		if c.OnError != nil {
			c.OnError(err)
		}
		if failed++; c.Attempts > 0 && failed >= c.Attempts {
			return out, fmt.Errorf("sending events: %w", err)
		}
		if wait <= 0 {
			wait = b.Next()
		}
		if !retry.Pause(ctx.Done(), wait) {
			return out, fmt.Errorf("sending events: %w (last: %v)", ctx.Err(), err)
		}
	}
	return out, nil
}

func (c *Client) batch() int {
	if c.Batch > 0 {
		return c.Batch
	}
	return 100
}

func (c *Client) policy() retry.Policy {
	if c.Retry.First > 0 {
		return c.Retry
	}
	return retry.Policy{First: 250 * time.Millisecond, Max: 10 * time.Second, Jitter: true}
}

// settle counts the results of a batch of n events in order up to the
// first one to retry (503, or missing), and returns how many are settled;
// err is transient when some are not.
func settle(out *Outcome, results []ingestsvc.EventResult, n int) (int, error) {
	byIndex := make([]*ingestsvc.EventResult, n)
	for i := range results {
		if r := &results[i]; r.Index >= 0 && r.Index < n {
			byIndex[r.Index] = r
		}
	}
	for i, r := range byIndex {
		switch {
		case r == nil:
			return i, transientf("no result for event %d of the batch", i)
		case r.Accepted() && r.Duplicate:
			out.Duplicates++
		case r.Accepted():
			out.Stored++
		case r.Status >= 400 && r.Status < 500 && r.Status != http.StatusTooManyRequests && r.Status != http.StatusRequestTimeout:
			out.Rejected = append(out.Rejected, *r)
		default:
			return i, transientf("event %s: %d %s", r.ID, r.Status, r.Error)
		}
	}
	return n, nil
}

// batchEnd returns the end of the batch starting at start: at most n
// events and about 4 MiB of data.
func batchEnd(evs []event.Event, start, n int) int {
	const maxBytes = 4 << 20
	size, end := 0, start
	for end < len(evs) && end-start < n {
		size += len(evs[end].Data()) + 512
		if size > maxBytes && end > start {
			break
		}
		end++
	}
	return end
}

// post sends one batch and returns its per-event results, or an error
// (transient or not) with the Retry-After the edge asked for.
func (c *Client) post(ctx context.Context, batch []event.Event) ([]ingestsvc.EventResult, time.Duration, error) {
	body, err := json.Marshal(batch)
	if err != nil {
		return nil, 0, fmt.Errorf("encoding events: %w", err)
	}
	resp, err := c.do(ctx, http.MethodPost, "/v1/events", ingestsvc.MediaBatch, bytes.NewReader(body))
	if err != nil {
		return nil, 0, transientError{err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, 0, transientf("reading reply: %v", err)
	}
	wait := retryAfter(resp.Header.Get("Retry-After"))
	if resp.StatusCode == http.StatusAccepted {
		var r ingestsvc.Response
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, 0, transientf("decoding reply: %v", err)
		}
		return r.Results, 0, nil
	}
	var p events.Problem
	if json.Unmarshal(b, &p) == nil && len(p.Results) > 0 {
		return p.Results, wait, nil
	}
	err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(firstNonEmpty(p.Detail, string(b))))
	if refusesEvents(resp.StatusCode) {
		if len(batch) > 1 {
			return nil, 0, fmt.Errorf("%w: %v", errSplit, err)
		}
		return []ingestsvc.EventResult{{ID: batch[0].ID(), Status: resp.StatusCode, Error: err.Error()}}, 0, nil
	}
	if transientStatus(resp.StatusCode) {
		err = transientError{err}
	}
	return nil, wait, err
}

// do sends one request to the edge with the token.
func (c *Client) do(ctx context.Context, method, path, contentType string, body io.Reader) (*http.Response, error) {
	base := c.URL
	if base == "" {
		base = DefaultURL
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	return hc.Do(req)
}

var defaultHTTP = &http.Client{Timeout: 60 * time.Second}

// refusesEvents: the request's events are refused (not its credentials).
func refusesEvents(code int) bool {
	return code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge ||
		code == http.StatusUnsupportedMediaType || code == http.StatusUnprocessableEntity
}

func transientStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500
}

// retryAfter parses a Retry-After of seconds (capped at a minute).
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, time.Minute)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
