package events

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MediaProblem is the media type of every error body of the HTTP edge (RFC
// 9457), and the Content-Type of a NATS error reply that carries a Problem.
const MediaProblem = "application/problem+json"

// Problem is the one problem document Recall answers errors with (RFC 9457,
// docs/api.md#problem-types): over HTTP as the body of every non-2xx answer,
// over NATS as the data of a micro error reply. Type is ProblemTypeBase plus
// the fragment naming the problem's section of docs/api.md.
//
// Only the members of one kind of problem are set: event errors carry
// Accepted, Rejected, Errors and Results; an invalid configuration carries
// FieldErrors; an ambiguous reference Ref and Candidates. Both Errors and
// FieldErrors travel as the member "errors" (at most one is set); decoding
// fills Errors when the entries are event results (they have a status),
// else FieldErrors.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`

	Accepted int `json:"accepted,omitempty"`
	Rejected int `json:"rejected,omitempty"`
	// Errors lists the rejected events of a request.
	Errors []EventResult `json:"-"`
	// Results, when present, lists every event of the request, so a
	// partially accepted batch says which events were stored.
	Results []EventResult `json:"results,omitempty"`

	// FieldErrors lists the invalid fields of a configuration.
	FieldErrors []ConfigFieldError `json:"-"`

	// Ref is the ambiguous reference; Candidates the sessions it matched.
	Ref        string      `json:"ref,omitempty"`
	Candidates []Candidate `json:"candidates,omitempty"`
}

// Candidate is one session an ambiguous reference matched.
type Candidate struct {
	Session     string `json:"session"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// Kind is the fragment of Type (the section of docs/api.md), or Type
// itself when it is not one of Recall's.
func (p Problem) Kind() string {
	k, _ := strings.CutPrefix(p.Type, ProblemTypeBase)
	return k
}

// MarshalJSON writes Errors or FieldErrors as "errors", the members in
// the order the edge always wrote them.
func (p Problem) MarshalJSON() ([]byte, error) {
	w := struct {
		Type       string        `json:"type"`
		Title      string        `json:"title"`
		Status     int           `json:"status"`
		Detail     string        `json:"detail,omitempty"`
		Accepted   int           `json:"accepted,omitempty"`
		Rejected   int           `json:"rejected,omitempty"`
		Errors     any           `json:"errors,omitempty"`
		Results    []EventResult `json:"results,omitempty"`
		Candidates []Candidate   `json:"candidates,omitempty"`
		Ref        string        `json:"ref,omitempty"`
	}{p.Type, p.Title, p.Status, p.Detail, p.Accepted, p.Rejected, nil, p.Results, p.Candidates, p.Ref}
	switch {
	case len(p.Errors) > 0:
		w.Errors = p.Errors
	case len(p.FieldErrors) > 0:
		w.Errors = p.FieldErrors
	}
	return json.Marshal(w)
}

// problemWire is Problem without its methods, for UnmarshalJSON.
type problemWire Problem

// UnmarshalJSON reads "errors" into Errors or FieldErrors.
func (p *Problem) UnmarshalJSON(b []byte) error {
	w := struct {
		*problemWire
		Errors []EventResult `json:"errors"`
	}{problemWire: (*problemWire)(p)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p.Errors, p.FieldErrors = nil, nil
	for _, e := range w.Errors {
		if e.Status != 0 {
			p.Errors = w.Errors
			return nil
		}
	}
	for _, e := range w.Errors {
		p.FieldErrors = append(p.FieldErrors, ConfigFieldError{Field: e.Field, Error: e.Error})
	}
	return nil
}

// String is the problem as one line: status, detail, kind, and the
// candidates of an ambiguous reference.
func (p Problem) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", p.Status, p.Title)
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	if k := p.Kind(); k != "" {
		b.WriteString(" (" + k + ")")
	}
	for _, c := range p.Candidates {
		fmt.Fprintf(&b, "; candidate %s %q", c.Session, c.Name)
		if c.Description != "" {
			b.WriteString(" " + c.Description)
		}
	}
	return b.String()
}

// EventResult is the outcome of one submitted event, over HTTP (POST
// /v1/events) and the NATS ingest endpoint alike.
type EventResult struct {
	// Index is the event's position in the request (0 for a single event).
	Index int `json:"index"`
	// ID is the event id as submitted, when it could be read.
	ID string `json:"id,omitempty"`
	// Status is 202 (stored, or a duplicate of a stored event), 400
	// (invalid), 403 (tenant mismatch), 410 (session erased), 413 (too
	// large) or 503 (JetStream did not acknowledge, or an earlier event of
	// the session in the request was not stored; retry).
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
func (r EventResult) Accepted() bool { return r.Status == 202 }

// IngestReply is the body of an ingest request whose events were all
// accepted (HTTP 202, or a NATS reply without error headers).
type IngestReply struct {
	Accepted   int           `json:"accepted"`
	Duplicates int           `json:"duplicates"`
	Rejected   int           `json:"rejected"`
	Results    []EventResult `json:"results"`
}
