package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/recallhq/recall/pkg/events"
)

// APIError is a non-2xx answer of the HTTP edge: its status, its
// Retry-After, and the problem document it carried (a body that was not
// one becomes the Problem's Detail). errors.Is(err, ErrService) is true, as
// for a *ServiceError over NATS.
type APIError struct {
	Method, Path string
	Status       int
	// RetryAfter is the edge's Retry-After (a 429 or 503), 0 when none.
	RetryAfter time.Duration
	Problem    events.Problem
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "recall answered %s %s with %s", e.Method, e.Path, e.Problem)
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, "; retry after %s", e.RetryAfter)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrService) true.
func (e *APIError) Is(target error) bool { return target == ErrService }

// Retryable reports whether the same request may succeed later: 408, 429
// and 5xx but 501.
func (e *APIError) Retryable() bool { return retryableStatus(e.Status) }

func newAPIError(method, path string, a answer) *APIError {
	e := &APIError{Method: method, Path: path, Status: a.status, RetryAfter: a.retryAfter}
	if json.Unmarshal(a.body, &e.Problem) != nil || e.Problem.Status == 0 {
		e.Problem = events.Problem{Status: a.status, Title: http.StatusText(a.status),
			Detail: strings.TrimSpace(string(a.body[:min(len(a.body), 512)]))}
	}
	return e
}

// EventError is the error of an event the edge did not store: its result
// (status, field, reason). Retryable for 408, 429 and 503 (not stored now,
// or an earlier event of its session was not).
type EventError struct {
	Result events.EventResult
}

func (e *EventError) Error() string {
	r := e.Result
	msg := fmt.Sprintf("event %s: %d %s", r.ID, r.Status, http.StatusText(r.Status))
	if r.Field != "" {
		msg += ": " + r.Field
	}
	if r.Error != "" {
		msg += ": " + r.Error
	}
	return msg
}

// Retryable reports whether sending the event again may store it.
func (e *EventError) Retryable() bool { return retryableStatus(e.Result.Status) }

// transportError is a failure to get an answer at all: worth retrying
// while the call's window lasts.
type transportError struct{ error }

func (e *transportError) Unwrap() error { return e.error }

// Retryable reports whether err, from the HTTP or the NATS client, is
// worth retrying with the same request (the same event ids): no answer or
// an attempt's deadline, and the refusals that say "later" (408, 429, 5xx
// but 501; over NATS codes 429, 503 and 504). A cancelled context is not.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		return r.Retryable()
	}
	var se *ServiceError
	if errors.As(err, &se) {
		n, _ := strconv.Atoi(se.Code)
		return n == http.StatusTooManyRequests || n == http.StatusServiceUnavailable || n == http.StatusGatewayTimeout
	}
	var te *transportError
	return errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded)
}

// Status is the HTTP-like status err carries — of an *APIError, an
// *EventError, or a *ServiceError over NATS — and 0 for any other error.
func Status(err error) int {
	var ae *APIError
	var ee *EventError
	var se *ServiceError
	switch {
	case errors.As(err, &ae):
		return ae.Status
	case errors.As(err, &ee):
		return ee.Result.Status
	case errors.As(err, &se):
		n, _ := strconv.Atoi(se.Code)
		return n
	}
	return 0
}

func retryableStatus(s int) bool {
	return s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500 && s != http.StatusNotImplemented
}

// retryAfter parses a Retry-After of seconds (capped at a minute).
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, time.Minute)
}

// redactURLError masks the password of the URL a *url.Error names (net/http
// strips it already; url.Parse's errors quote the text given).
func redactURLError(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	if u, perr := url.Parse(ue.URL); perr == nil {
		ue.URL = u.Redacted()
	} else {
		ue.URL = "(a URL that does not parse)"
	}
	return err
}
