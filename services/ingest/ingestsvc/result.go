package ingestsvc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/recallhq/recall/pkg/events"
)

// MediaProblem is the RFC 9457 media type of every error body.
const MediaProblem = "application/problem+json"

// ProblemTypeBase prefixes every problem "type"; the fragment names the
// section of docs/api.md that explains it.
const ProblemTypeBase = events.ProblemTypeBase

// EventResult is the outcome of one submitted event.
type EventResult struct {
	// Index is the event's position in the request (0 for a single event).
	Index int `json:"index"`
	// ID is the event id as submitted, when it could be read.
	ID string `json:"id,omitempty"`
	// Status is 202 (stored, or a duplicate of a stored event), 400
	// (invalid), 403 (tenant mismatch), 413 (too large) or 503 (JetStream
	// did not acknowledge; retry).
	Status int `json:"status"`
	// Seq is the sequence of the stored event in its session's transcript
	// shard stream; for a duplicate, the sequence of the original.
	Seq uint64 `json:"seq,omitempty"`
	// Duplicate is true when the event id was stored before (within the
	// dedup window) and this copy was not stored again.
	Duplicate bool `json:"duplicate,omitempty"`
	// Field names the attribute or data path that made the event invalid.
	Field string `json:"field,omitempty"`
	// Error says what is wrong.
	Error string `json:"error,omitempty"`
}

// Accepted reports whether the event is stored (now or before).
func (r EventResult) Accepted() bool { return r.Status == http.StatusAccepted }

// Response is the body of a request whose events were all accepted (HTTP
// 202, or a NATS reply without error headers).
type Response struct {
	Accepted   int           `json:"accepted"`
	Duplicates int           `json:"duplicates"`
	Rejected   int           `json:"rejected"`
	Results    []EventResult `json:"results"`
}

// Problem is an RFC 9457 problem details body. Errors lists the rejected
// events; Results, when present, lists every event of the request, so a
// partially accepted batch says which events were stored.
type Problem struct {
	Type     string        `json:"type"`
	Title    string        `json:"title"`
	Status   int           `json:"status"`
	Detail   string        `json:"detail,omitempty"`
	Accepted int           `json:"accepted,omitempty"`
	Rejected int           `json:"rejected,omitempty"`
	Errors   []EventResult `json:"errors,omitempty"`
	Results  []EventResult `json:"results,omitempty"`
}

// Problem types (the fragment of ProblemTypeBase).
const (
	ProblemInvalidEvent     = "invalid-event"
	ProblemInvalidBody      = "invalid-body"
	ProblemPartial          = "partially-accepted"
	ProblemTooLarge         = "too-large"
	ProblemUnsupportedMedia = "unsupported-media-type"
	ProblemUnauthenticated  = "unauthenticated"
	ProblemTenantMismatch   = "tenant-mismatch"
	ProblemUnavailable      = "unavailable"
	ProblemTimeout          = "timeout"
	ProblemUpstream         = "upstream-error"
)

func newProblem(kind string, status int, detail string) *Problem {
	return &Problem{Type: ProblemTypeBase + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}

// errTooLarge marks an event over MaxEventBytes.
type errTooLarge struct{ size, max int }

func (e errTooLarge) Error() string {
	return fmt.Sprintf("event is %d bytes, at most %d allowed", e.size, e.max)
}

// rejection turns an ingest error into a per-event result.
func rejection(index int, id string, err error) EventResult {
	r := EventResult{Index: index, ID: id, Status: http.StatusBadRequest, Error: err.Error()}
	var fe *events.FieldError
	var tl errTooLarge
	switch {
	case errors.As(err, &fe):
		r.Field, r.Error = fe.Field, fe.Reason
	case errors.As(err, &tl):
		r.Status = http.StatusRequestEntityTooLarge
	case errors.Is(err, events.ErrTenantMismatch):
		r.Status, r.Field = http.StatusForbidden, events.ExtTenant
	}
	return r
}

// claimFailure is the result of an event whose claim check failed: 413
// when its attributes alone are too large, else 503 (retry).
func claimFailure(index int, id string, err error) EventResult {
	if errors.Is(err, errStubTooLarge) {
		return EventResult{Index: index, ID: id, Status: http.StatusRequestEntityTooLarge, Error: err.Error()}
	}
	return EventResult{Index: index, ID: id, Status: http.StatusServiceUnavailable, Error: err.Error()}
}

// reasonOf is the recall_ingest_rejections_total reason of a result status.
func reasonOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusForbidden:
		return "tenant_mismatch"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusGone:
		return "erased"
	default:
		return "unavailable"
	}
}

// summarize computes the status of a request from its per-event results:
// 202 when every event was accepted; 207 when some were and some were not;
// otherwise the status the rejected events share (400 when they differ).
// It returns the body to send: *Response for 202, *Problem otherwise.
func summarize(results []EventResult) (int, any) {
	var accepted, dups, rejected int
	status := 0
	for i := range results {
		r := &results[i]
		if r.Accepted() {
			accepted++
			if r.Duplicate {
				dups++
			}
			continue
		}
		rejected++
		if status == 0 {
			status = r.Status
		} else if status != r.Status {
			status = http.StatusBadRequest
		}
	}
	if rejected == 0 {
		return http.StatusAccepted, &Response{Accepted: accepted, Duplicates: dups, Results: results}
	}
	errs := make([]EventResult, 0, rejected)
	for _, r := range results {
		if !r.Accepted() {
			errs = append(errs, r)
		}
	}
	kind := ProblemInvalidEvent
	if accepted > 0 {
		status, kind = http.StatusMultiStatus, ProblemPartial
	} else {
		switch status {
		case http.StatusForbidden:
			kind = ProblemTenantMismatch
		case http.StatusRequestEntityTooLarge:
			kind = ProblemTooLarge
		case http.StatusServiceUnavailable:
			kind = ProblemUnavailable
		case http.StatusGone:
			kind = ProblemGone
		}
	}
	var detail string
	if len(results) == 1 {
		detail = describe(errs[0])
	} else {
		detail = fmt.Sprintf("%d of %d events rejected (first: event %d: %s); the other %d are stored", rejected, len(results), errs[0].Index, describe(errs[0]), accepted)
	}
	p := newProblem(kind, status, detail)
	p.Accepted, p.Rejected, p.Errors, p.Results = accepted, rejected, errs, results
	return status, p
}

func describe(r EventResult) string {
	if r.Field != "" {
		return r.Field + ": " + r.Error
	}
	return r.Error
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
	}
	return b
}
