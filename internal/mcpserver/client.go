package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/recallhq/recall/pkg/events"
)

// ErrAPI is matched (errors.Is) by every *APIError.
var ErrAPI = errors.New("recall API error")

// maxReplyBytes bounds a reply read from the HTTP edge. Replies are
// reassembled by the edge; a compaction of a long session is the largest.
const maxReplyBytes = 64 << 20

// Problem is the RFC 9457 problem document the HTTP edge answers errors with
// (docs/api.md#problem-types).
type Problem struct {
	Type   string `json:"type,omitempty"`
	Title  string `json:"title,omitempty"`
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Candidates lists the sessions an ambiguous reference matched.
	Candidates []struct {
		Session     string `json:"session"`
		Name        string `json:"name,omitempty"`
		Description string `json:"description,omitempty"`
	} `json:"candidates,omitempty"`
}

// APIError is a non-2xx answer of Recall's HTTP edge.
type APIError struct {
	Status     int
	RetryAfter string // the Retry-After header of a 429 or 503, if any
	Problem    Problem
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "recall answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Problem.Detail != "" {
		b.WriteString(": " + e.Problem.Detail)
	}
	if e.Problem.Type != "" {
		b.WriteString(" (" + e.Problem.Type + ")")
	}
	for _, c := range e.Problem.Candidates {
		fmt.Fprintf(&b, "\n  candidate: %s %q %s", c.Session, c.Name, c.Description)
	}
	if e.RetryAfter != "" {
		b.WriteString("; retry after " + e.RetryAfter + " s")
	}
	return b.String()
}

// Is reports ErrAPI.
func (e *APIError) Is(target error) bool { return target == ErrAPI }

// Client calls Recall's HTTP API (docs/api.md, "Session API") as one
// tenant: the tenant is the one its token authenticates (tenant "default"
// against an edge in open mode). It is safe for concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// NewClient returns a client of the edge at baseURL (http://host:port)
// that sends token as its bearer token (none when empty). hc nil uses
// http.DefaultClient; each call is bounded by its context.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc}
}

// tokenKey carries a per-request bearer token in a context.
type tokenKey struct{}

// WithToken returns a context whose calls use token instead of the
// client's own (an MCP client's Authorization over streamable HTTP).
func WithToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// do sends method path with body (JSON, nil for none) and decodes a 2xx
// reply into out. Any other status is an *APIError.
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	token := c.token
	if t, ok := ctx.Value(tokenKey{}).(string); ok && t != "" {
		token = t
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling recall at %s (is it running? try 'recall up'): %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return fmt.Errorf("reading the reply of %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &APIError{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After")}
		if json.Unmarshal(data, &e.Problem) != nil || e.Problem.Detail == "" {
			e.Problem.Detail = strings.TrimSpace(string(data))
		}
		return e
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decoding the reply of %s %s: %w", method, path, err)
	}
	return nil
}

func sessionPath(session, verb string) string {
	return "/v1/sessions/" + url.PathEscape(session) + "/" + verb
}

// Compact asks for a compaction of session now.
func (c *Client) Compact(ctx context.Context, session string, r events.CompactRequest) (*events.CompactReply, error) {
	var out events.CompactReply
	return &out, c.do(ctx, http.MethodPost, sessionPath(session, "compact"), r, &out)
}

// Edit asks which blocks of session's current context to clear.
func (c *Client) Edit(ctx context.Context, session string, r events.EditRequest) (*events.EditReply, error) {
	var out events.EditReply
	return &out, c.do(ctx, http.MethodPost, sessionPath(session, "edit"), r, &out)
}

// Extract runs an extraction of session now and waits for its result.
func (c *Client) Extract(ctx context.Context, session string, r events.ExtractRequest) (*events.ExtractResult, error) {
	var out events.ExtractResult
	return &out, c.do(ctx, http.MethodPost, sessionPath(session, "extract"), r, &out)
}

// Memory reads session's memory record (404 when it has none yet).
func (c *Client) Memory(ctx context.Context, session string) (*events.MemoryReply, error) {
	var out events.MemoryReply
	return &out, c.do(ctx, http.MethodGet, sessionPath(session, "memory"), nil, &out)
}

// Sessions lists one page of the session index.
func (c *Client) Sessions(ctx context.Context, r events.SessionsRequest) (*events.SessionsReply, error) {
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
	return &out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// Resolve resolves a reference (r.Ref) or every @@reference of r.Text.
func (c *Client) Resolve(ctx context.Context, r events.ResolveRequest) (*events.ResolveReply, error) {
	var out events.ResolveReply
	return &out, c.do(ctx, http.MethodPost, "/v1/resolve", r, &out)
}

// Query asks the session ref (an id or a name) a question.
func (c *Client) Query(ctx context.Context, ref string, r events.QueryRequest) (*events.QueryReply, error) {
	var out events.QueryReply
	return &out, c.do(ctx, http.MethodPost, sessionPath(ref, "query"), r, &out)
}

// UserMemory reads user's long-term memory documents, of the given types
// (all when none).
func (c *Client) UserMemory(ctx context.Context, user string, types ...string) (*events.LTMReply, error) {
	path := "/v1/users/" + url.PathEscape(user) + "/memory"
	if len(types) > 0 {
		path += "?types=" + url.QueryEscape(strings.Join(types, ","))
	}
	var out events.LTMReply
	return &out, c.do(ctx, http.MethodGet, path, nil, &out)
}
