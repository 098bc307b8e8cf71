package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// The session API over HTTP (docs/api.md#session-api): the same verbs,
// bodies and answers as Client's over NATS.

func sessionPath(session, verb string) string {
	return "/v1/sessions/" + url.PathEscape(session) + "/" + verb
}

// get reads path into out (retried).
func (c *HTTP) get(ctx context.Context, path string, out any) error {
	return c.call(ctx, request{method: http.MethodGet, path: path}, out)
}

// post sends body (JSON, nil: none) to path and decodes the answer into
// out; acts says the call does work a retry would repeat.
func (c *HTTP) post(ctx context.Context, path string, body any, acts bool, out any) error {
	b, err := encodeBody(path, body)
	if err != nil {
		return err
	}
	r := request{method: http.MethodPost, path: path, body: b, acts: acts}
	if b != nil {
		r.contentType = "application/json"
	}
	return c.call(ctx, r, out)
}

// Memory returns session's memory record and its revision; a session
// without memory yet is an *APIError with Status 404.
func (c *HTTP) Memory(ctx context.Context, session string) (*events.MemoryReply, error) {
	var out events.MemoryReply
	return ptr(&out, c.get(ctx, sessionPath(session, events.VerbMemory), &out))
}

// Extract runs an extraction of session now and waits for its outcome
// (see Client.Extract). Not retried but when refused with 429.
func (c *HTTP) Extract(ctx context.Context, session string, r events.ExtractRequest) (*events.ExtractResult, error) {
	var out events.ExtractResult
	return ptr(&out, c.post(ctx, sessionPath(session, events.VerbExtract), r, true, &out))
}

// Compact asks for a compaction of session now (see Client.Compact). Not
// retried but when refused with 429.
func (c *HTTP) Compact(ctx context.Context, session string, r events.CompactRequest) (*events.CompactReply, error) {
	var out events.CompactReply
	return ptr(&out, c.post(ctx, sessionPath(session, events.VerbCompact), r, true, &out))
}

// Edit asks which blocks of session's current context to clear (see
// Client.Edit); the answer depends only on the transcript and r, so it is
// retried.
func (c *HTTP) Edit(ctx context.Context, session string, r events.EditRequest) (*events.EditReply, error) {
	var out events.EditReply
	return ptr(&out, c.post(ctx, sessionPath(session, events.VerbEdit), r, false, &out))
}

// Index returns session's index entry (see Client.Index).
func (c *HTTP) Index(ctx context.Context, session string) (*events.IndexReply, error) {
	var out events.IndexReply
	return ptr(&out, c.get(ctx, sessionPath(session, "index"), &out))
}

// Reindex indexes session now (see Client.Reindex). Not retried but when
// refused with 429.
func (c *HTTP) Reindex(ctx context.Context, session string) (*events.IndexReply, error) {
	var out events.IndexReply
	return ptr(&out, c.post(ctx, sessionPath(session, "index"), nil, true, &out))
}

// Sessions lists one page of the tenant's sessions, newest first.
func (c *HTTP) Sessions(ctx context.Context, r events.SessionsRequest) (*events.SessionsReply, error) {
	q := url.Values{}
	for k, v := range map[string]string{"q": r.Q, "tag": r.Tag, "cursor": r.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if r.Limit > 0 {
		q.Set("limit", strconv.Itoa(r.Limit))
	}
	path := "/v1/sessions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out events.SessionsReply
	return ptr(&out, c.get(ctx, path, &out))
}

// Resolve resolves a reference (see Client.Resolve); an ambiguous one is
// an *APIError with Status 409 whose Problem lists the Candidates.
func (c *HTTP) Resolve(ctx context.Context, ref string) (*events.Resolution, error) {
	var out events.ResolveReply
	if err := c.get(ctx, "/v1/resolve?ref="+url.QueryEscape(ref), &out); err != nil {
		return nil, err
	}
	if len(out.Resolved) == 0 {
		return nil, &APIError{Method: http.MethodGet, Path: "/v1/resolve", Status: http.StatusNotFound,
			Problem: events.Problem{Type: events.ProblemTypeBase + "not-found", Title: http.StatusText(http.StatusNotFound),
				Status: http.StatusNotFound, Detail: "nothing resolved for " + strconv.Quote(ref)}}
	}
	return &out.Resolved[0], nil
}

// References resolves every @@reference of a user message (see
// Client.References). With answer it asks the sessions, which costs model
// calls: then it is not retried but when refused with 429.
func (c *HTTP) References(ctx context.Context, text string, answer bool) (*events.ResolveReply, error) {
	var out events.ResolveReply
	return ptr(&out, c.post(ctx, "/v1/resolve", events.ResolveRequest{Text: text, Answer: answer}, answer, &out))
}

// Query asks the session ref names a question (see Client.Query). Not
// retried but when refused with 429.
func (c *HTTP) Query(ctx context.Context, ref string, r events.QueryRequest) (*events.QueryReply, error) {
	var out events.QueryReply
	return ptr(&out, c.post(ctx, sessionPath(ref, events.VerbQuery), r, true, &out))
}

// Commit commits session's long-term memory batch now (see
// Client.Commit). Not retried but when refused with 429.
func (c *HTTP) Commit(ctx context.Context, session string) (*events.MemoryCommitted, error) {
	var out events.MemoryCommitted
	return ptr(&out, c.post(ctx, sessionPath(session, events.VerbCommit), nil, true, &out))
}

// UserMemory returns user's long-term memory (the types given, or all)
// and its context block.
func (c *HTTP) UserMemory(ctx context.Context, user string, types ...string) (*events.LTMReply, error) {
	path := "/v1/users/" + url.PathEscape(user) + "/memory"
	if len(types) > 0 {
		path += "?types=" + url.QueryEscape(strings.Join(types, ","))
	}
	var out events.LTMReply
	return ptr(&out, c.get(ctx, path, &out))
}

// ptr returns out, or nil with err.
func ptr[T any](out *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return out, nil
}
