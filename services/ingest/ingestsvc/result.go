package ingestsvc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/recallhq/recall/pkg/claimcheck"
	"github.com/recallhq/recall/pkg/events"
)

// MediaProblem is the RFC 9457 media type of every error body.
const MediaProblem = events.MediaProblem

// ProblemTypeBase prefixes every problem "type"; the fragment names the
// section of docs/api.md that explains it.
const ProblemTypeBase = events.ProblemTypeBase

// EventResult is the outcome of one submitted event.
//
// Deprecated: use events.EventResult (this is the same type).
type EventResult = events.EventResult

// Response is the body of a request whose events were all accepted.
//
// Deprecated: use events.IngestReply (this is the same type).
type Response = events.IngestReply

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
	if errors.Is(err, claimcheck.ErrStubTooLarge) {
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
// It returns the body to send: *events.IngestReply for 202, *events.Problem otherwise.
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
		return http.StatusAccepted, &events.IngestReply{Accepted: accepted, Duplicates: dups, Results: results}
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

// newProblem is the problem of the kind (a fragment of docs/api.md) with
// status, its status text as title, and detail.
func newProblem(kind string, status int, detail string) *events.Problem {
	return &events.Problem{Type: ProblemTypeBase + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}
