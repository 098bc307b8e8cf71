package gatewaysvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// Headers the gateway reads and never forwards: they are Recall's, not the
// provider's (a Recall token must not reach a model provider).
const (
	HeaderRecallToken   = "X-Recall-Token"
	HeaderRecallSession = "X-Recall-Session"
)

// provider is one upstream API family.
type provider struct {
	name  string // "anthropic" or "openai"
	proxy *httputil.ReverseProxy
}

// respHook is called with the upstream's response before it is copied to
// the client; it may wrap resp.Body (capture) but must not read it.
type respHook func(resp *http.Response) error

type hookKey struct{}

// newProvider returns the pass-through of one upstream. The client's
// headers, its provider key among them, go to the upstream as they are,
// but for Recall's own headers and Accept-Encoding (the transport asks for
// gzip itself and decompresses, so capture reads plain bytes). Responses —
// errors included, with their headers — are copied as they arrive, flushed
// after every write: a stream is never buffered. An upstream that cannot
// be reached is answered 502 in the provider's error shape.
func newProvider(name string, target *url.URL, transport http.RoundTripper, log *slog.Logger) *provider {
	p := &provider{name: name}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Del(HeaderRecallToken)
			pr.Out.Header.Del(HeaderRecallSession)
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport:     transport,
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if h, ok := resp.Request.Context().Value(hookKey{}).(respHook); ok && h != nil {
				return h(resp)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away
			}
			log.Warn("upstream request failed", "provider", name, "path", r.URL.Path, "err", err)
			writeError(w, name, http.StatusBadGateway, "api_error", "the Recall gateway could not reach the upstream: "+err.Error())
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return p
}

// forward sends r to the upstream at path, with body instead of r's body
// when body is not nil, calling hook with the response.
func (p *provider) forward(w http.ResponseWriter, r *http.Request, path string, body []byte, hook respHook) {
	ctx := r.Context()
	if hook != nil {
		ctx = context.WithValue(ctx, hookKey{}, hook)
	}
	out := r.Clone(ctx)
	out.URL.Path, out.URL.RawPath = path, ""
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	p.proxy.ServeHTTP(w, out)
}

// newTransport is the upstreams' HTTP transport: keep-alive connections
// (many per host: agents run many requests at once), a bound on the wait
// for response headers, never on a stream's length.
func newTransport(headerTimeout time.Duration) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		ExpectContinueTimeout: time.Second,
	}
}

// errBodyTooLarge is returned by readBody for a body over the limit.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads r's body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	size := int64(bytes.MinRead)
	if r.ContentLength > 0 {
		size = r.ContentLength + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errBodyTooLarge
	}
	return buf.Bytes(), err
}
