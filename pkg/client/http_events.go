package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// errSplit is a batch refused whole: send its events one by one.
var errSplit = errors.New("batch refused whole")

// maxRequestBytes is about the most event data one request carries.
const maxRequestBytes = 4 << 20

// Publish stores one event through the edge (POST /v1/events) and returns
// its result once the edge answered; a rejected event's error is an
// *EventError. Retried as PublishBatch.
func (c *HTTP) Publish(ctx context.Context, e event.Event) (Result, error) {
	res, err := c.PublishBatch(ctx, []event.Event{e})
	if len(res) == 1 && res[0].Err != nil {
		return res[0], res[0].Err
	}
	return res[0], err
}

// PublishBatch posts evs in order, in requests of at most HTTPConfig.Batch
// events and about 4 MiB, and returns once every event is settled: stored
// (Seq, and Duplicate when stored before) or refused for good (Err is an
// *EventError: invalid, tenant mismatch, too large, session erased).
// Results are in input order. Failures worth retrying are retried from the
// first unsettled event, in order, with the same ids (see HTTP); when the
// retries end, the unsettled events carry the last error. A batch the edge
// refuses whole (a body over its limit) is sent again one event at a time.
// The error is non-nil when any event is not stored.
func (c *HTTP) PublishBatch(ctx context.Context, evs []event.Event) ([]Result, error) {
	res := make([]Result, len(evs))
	single := 0 // events before single go one per request
	for start := 0; start < len(evs); {
		end := batchEnd(evs, start, c.cfg.Batch)
		if start < single {
			end = start + 1
		}
		err := c.publishRequest(ctx, evs[start:end], res[start:end])
		if errors.Is(err, errSplit) {
			single = end
			continue
		}
		if err != nil {
			for i := start; i < len(evs); i++ {
				if res[i] == (Result{}) {
					res[i].Err = err
				}
			}
			return res, fmt.Errorf("publishing events: %w", err)
		}
		start = end
	}
	failed := 0
	for _, r := range res {
		if r.Err != nil {
			failed++
		}
	}
	if failed > 0 {
		return res, fmt.Errorf("%d of %d events not stored: %w", failed, len(evs), firstErr(res))
	}
	return res, nil
}

// publishRequest settles the events of one request into res, retrying
// from the first unsettled one.
func (c *HTTP) publishRequest(ctx context.Context, evs []event.Event, res []Result) error {
	from := 0
	return c.retrying(ctx, true, func(actx context.Context) error {
		results, err := c.postEvents(actx, evs[from:])
		if err != nil {
			return err
		}
		n, err := settle(results, res[from:])
		from += n
		return err
	})
}

// postEvents sends one request of events and returns its per-event
// results, or why there are none.
func (c *HTTP) postEvents(ctx context.Context, batch []event.Event) ([]events.EventResult, error) {
	body, err := json.Marshal(batch)
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("encoding events: %w", err))
	}
	r := request{method: http.MethodPost, path: "/v1/events", contentType: event.ApplicationCloudEventsBatchJSON, body: body}
	a, err := c.send(ctx, r)
	if err != nil {
		return nil, err
	}
	if a.status == http.StatusAccepted {
		var rep events.IngestReply
		if err := json.Unmarshal(a.body, &rep); err != nil {
			return nil, &transportError{fmt.Errorf("decoding the answer of POST /v1/events: %w", err)}
		}
		return rep.Results, nil
	}
	e := newAPIError(r.method, r.path, a)
	if len(e.Problem.Results) > 0 {
		return e.Problem.Results, nil
	}
	if refusesEvents(a.status) {
		if len(batch) > 1 {
			return nil, retry.Permanent(fmt.Errorf("%w: %w", errSplit, e))
		}
		return []events.EventResult{{ID: batch[0].ID(), Status: a.status, Error: e.Problem.Detail}}, nil
	}
	return nil, retry.Wait(e, a.retryAfter)
}

// settle fills res with the results of its events, in order, up to the
// first one to send again, and returns how many are settled; err is
// worth retrying when some are not.
func settle(results []events.EventResult, res []Result) (int, error) {
	byIndex := make([]*events.EventResult, len(res))
	for i := range results {
		if r := &results[i]; r.Index >= 0 && r.Index < len(res) {
			byIndex[r.Index] = r
		}
	}
	for i, r := range byIndex {
		switch {
		case r == nil:
			return i, &transportError{fmt.Errorf("the edge gave no result for event %d of the request", i)}
		case r.Accepted():
			res[i] = Result{Seq: r.Seq, Duplicate: r.Duplicate}
		case retryableStatus(r.Status):
			return i, &EventError{Result: *r}
		default:
			res[i] = Result{Err: &EventError{Result: *r}}
		}
	}
	return len(res), nil
}

// refusesEvents: the request's events are refused (not its credentials).
func refusesEvents(code int) bool {
	return code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge ||
		code == http.StatusUnsupportedMediaType || code == http.StatusUnprocessableEntity
}

// batchEnd returns the end of the request starting at start: at most n
// events and about maxRequestBytes of data.
func batchEnd(evs []event.Event, start, n int) int {
	size, end := 0, start
	for end < len(evs) && end-start < n {
		size += len(evs[end].Data()) + 512
		if size > maxRequestBytes && end > start {
			break
		}
		end++
	}
	return end
}
