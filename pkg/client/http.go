package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// DefaultURL is Recall's HTTP edge when none is configured (what `recall
// up` serves).
const DefaultURL = "http://127.0.0.1:8080"

// HTTPConfig configures an HTTP client. The zero value talks to DefaultURL
// in open mode with the default retries.
type HTTPConfig struct {
	// URL is the edge's base URL (DefaultURL when empty). A password in
	// it never appears in an error text.
	URL string
	// Token is the bearer token; its tenant is the client's. Empty: none
	// (an edge in open mode, tenant "default"). WithToken overrides it per
	// call.
	Token string
	// HTTP sends the requests; nil uses a client without a timeout of its
	// own (every attempt has a deadline, see Retry).
	HTTP *http.Client
	// Retry paces the retries: waits from Retry.First doubling to
	// Retry.Max (250 ms to 10 s when First is 0), and Retry.Attempt bounds
	// each attempt of a call that may be retried (30 s when 0). An
	// attempt never gets the whole retry window: when less than twice
	// Attempt remains, it gets half of what remains, so a lost reply
	// leaves time to ask again.
	Retry retry.Policy
	// Attempts bounds the attempts of one call (1: never retry); 0 retries
	// until the window ends.
	Attempts int
	// Window bounds the retries of a call whose context has no deadline:
	// 2 minutes when 0; negative: until the context ends.
	Window time.Duration
	// Batch is the most events per request of PublishBatch (100 when 0);
	// a request also stays around 4 MiB.
	Batch int
	// OnRetry, when set, is told every failure that is retried (for a
	// status line); it must not block.
	OnRetry func(error)
}

// HTTP is a client of Recall's HTTP edge (docs/api.md) as the tenant its
// token authenticates: events (POST /v1/events) and the session API. It is
// safe for concurrent use.
//
// Retries: a failure worth retrying (no answer, an attempt's deadline, 408,
// 429, 5xx, an event answered 503) is retried under HTTPConfig's policy,
// honouring Retry-After, until the call's context (or Window) ends. Events
// are resent with the same ids, so a request whose reply was lost stores
// them once (the edge deduplicates, docs/api.md#deduplication); reads and
// context edits are retried alike. A call that acts (Compact, Extract,
// Reindex, Commit, Query, References with answers) is retried only when
// the edge refused it before acting (429). A refusal is an *APIError
// carrying the edge's events.Problem; an event the edge did not store
// carries an *EventError in its Result.
type HTTP struct {
	base  string // without a trailing slash
	shown string // base with its password masked, for error texts
	cfg   HTTPConfig
}

// NewHTTP returns a client of the edge cfg.URL. A URL that does not parse,
// or is not http or https, is an error.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if cfg.URL == "" {
		cfg.URL = DefaultURL
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("recall URL: %w", redactURLError(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("recall URL %s: want http://host:port or https://host", u.Redacted())
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Retry.First <= 0 {
		cfg.Retry.First, cfg.Retry.Max, cfg.Retry.Jitter = 250*time.Millisecond, 10*time.Second, true
	}
	if cfg.Retry.Attempt <= 0 {
		cfg.Retry.Attempt = 30 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	base := strings.TrimRight(cfg.URL, "/")
	return &HTTP{base: base, shown: strings.TrimRight(u.Redacted(), "/"), cfg: cfg}, nil
}

// URL is the edge's base URL with its password, if any, masked.
func (c *HTTP) URL() string { return c.shown }

// tokenKey carries a per-call bearer token in a context.
type tokenKey struct{}

// WithToken returns a context whose HTTP calls send token instead of the
// client's own (an MCP client's own Authorization, say). Empty: the
// client's.
func WithToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, tokenKey{}, token)
}

// maxReplyBytes bounds a reply read from the edge; a compaction of a long
// session is the largest.
const maxReplyBytes = 64 << 20

// request is one call of the edge.
type request struct {
	method, path string
	contentType  string
	body         []byte // nil: none
	// acts: the call does work that a retry would repeat; it is retried
	// only when the edge refused it before acting.
	acts bool
}

// answer is what one attempt got: a status, its body and Retry-After.
type answer struct {
	status     int
	body       []byte
	retryAfter time.Duration
}

// window bounds ctx by cfg.Window when it has no deadline.
func (c *HTTP) window(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || c.cfg.Window < 0 {
		return context.WithCancel(ctx)
	}
	w := c.cfg.Window
	if w == 0 {
		w = 2 * time.Minute
	}
	return context.WithTimeout(ctx, w)
}

// send makes one attempt of r. An error is a failure to get an answer (a
// *transportError, worth retrying while ctx lasts); any status is an
// answer.
func (c *HTTP) send(ctx context.Context, r request) (answer, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, body)
	if err != nil {
		return answer{}, fmt.Errorf("building %s %s: %w", r.method, r.path, redactURLError(err))
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	req.Header.Set("Accept", "application/json, "+events.MediaProblem)
	token := c.cfg.Token
	if t, ok := ctx.Value(tokenKey{}).(string); ok && t != "" {
		token = t
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.cfg.HTTP.Do(req)
	if err != nil {
		return answer{}, &transportError{fmt.Errorf("calling recall at %s (is it running? try 'recall up'): %w", c.shown, redactURLError(err))}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return answer{}, &transportError{fmt.Errorf("reading the answer of %s %s: %w", r.method, r.path, redactURLError(err))}
	}
	return answer{status: resp.StatusCode, body: data, retryAfter: retryAfter(resp.Header.Get("Retry-After"))}, nil
}

// call sends r, retrying as the HTTP doc says, and decodes a 2xx answer
// into out. Any other status is an *APIError.
func (c *HTTP) call(ctx context.Context, r request, out any) error {
	var a answer
	err := c.retrying(ctx, !r.acts, func(actx context.Context) error {
		var err error
		if a, err = c.send(actx, r); err != nil {
			if r.acts {
				return retry.Permanent(err) // it may have acted
			}
			return err
		}
		if a.status >= 200 && a.status <= 299 {
			return nil
		}
		e := newAPIError(r.method, r.path, a)
		if r.acts && a.status != http.StatusTooManyRequests {
			return retry.Permanent(e)
		}
		return retry.Wait(e, a.retryAfter)
	})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(a.body, out); err != nil {
		return fmt.Errorf("decoding the answer of %s %s: %w", r.method, r.path, err)
	}
	return nil
}

// retrying runs attempt under the client's policy (retry.Policy.Do) within
// the call's window: an error that is not Retryable ends it at once, and
// so does the end of cfg.Attempts. bounded gives every attempt its own
// deadline, shorter than the window; a call that acts has none (it is
// retried only when refused before acting). When the window ends, the
// error names the last failure.
func (c *HTTP) retrying(ctx context.Context, bounded bool, attempt func(context.Context) error) error {
	ctx, cancel := c.window(ctx)
	defer cancel()
	p := c.cfg.Retry
	p.Attempts = c.cfg.Attempts
	if !bounded || p.Attempts == 1 {
		p.Attempt = 0
	}
	var last error
	err := p.Do(ctx, nil, "", func(actx context.Context) error {
		err := attempt(actx)
		if err == nil || !Retryable(err) {
			return retry.Permanent(err)
		}
		last = err
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(err)
		}
		return err
	})
	if err != nil && last != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w (last: %w)", err, last)
	}
	return err
}

func encodeBody(what string, body any) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s request: %w", what, err)
	}
	return b, nil
}
