package gatewaysvc

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// Provider names, the first segment of the gateway's paths.
const (
	providerAnthropic = "anthropic"
	providerOpenAI    = "openai"
)

// Gateway is the gateway's HTTP handler. It forwards without Recall until
// Attach gives it a connection, and whenever Recall cannot help. It is
// safe for concurrent use.
type Gateway struct {
	cfg       Config
	log       *slog.Logger
	auth      *ingestsvc.Auth
	anthropic *provider
	openai    *provider
	small     *microapi.Admission
	large     *microapi.Admission
	recall    atomic.Pointer[recall]
	capture   *capturer    // capture*.go
	compact   compactState // compact.go
	// clientCompaction tells capture a client's own compaction (capture_hooks.go).
	clientCompaction ClientCompaction
	stats            Stats
}

// New returns a gateway configured by cfg (defaults filled in). It does not
// listen: Run serves it, tests mount it on their own server.
func New(cfg Config, log *slog.Logger) (*Gateway, error) {
	cfg = cfg.withDefaults()
	a, o, err := cfg.upstreams()
	if err != nil {
		return nil, err
	}
	auth, err := ingestsvc.NewAuth(cfg.Tenants)
	if err != nil {
		return nil, err
	}
	t := newTransport(cfg.UpstreamTimeout)
	g := &Gateway{cfg: cfg, log: log, auth: auth,
		anthropic: newProvider(providerAnthropic, a, t, log), openai: newProvider(providerOpenAI, o, t, log),
		small: microapi.NewAdmission(cfg.TenantRequests, cfg.MaxRequests, 0),
		large: microapi.NewAdmission(cfg.TenantLargeBodies, cfg.MaxLargeBodies, 0)}
	g.capture, g.clientCompaction = newCapturer(g), defaultClientCompaction{}
	g.compact.key = markerKey(cfg.Tenants)
	g.clientCompaction = configuredClientCompaction{g: g}
	return g, nil
}

// ServeHTTP routes /anthropic/* and /openai/* (see the package comment);
// /healthz answers ok.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	var p *provider
	switch name {
	case providerAnthropic:
		p = g.anthropic
	case providerOpenAI:
		p = g.openai
	case "healthz":
		_, _ = w.Write([]byte("ok\n"))
		return
	default:
		writeError(w, providerAnthropic, http.StatusNotFound, "not_found_error", fmt.Sprintf("the Recall gateway serves /anthropic/v1/* and /openai/v1/*, not %s", r.URL.Path))
		return
	}
	g.stats.Requests.Add(1)
	tenant, ok := g.tenant(w, r, p.name)
	if !ok {
		return
	}
	release, ok := g.admit(w, r, p.name, tenant)
	if !ok {
		return
	}
	defer release()
	x := &exchange{g: g, p: p, w: w, r: r, path: "/" + rest, tenant: tenant}
	x.serve()
}

// tenant returns the request's tenant: with tenants configured, the one
// whose token is in x-recall-token; otherwise ingest's default tenant. A
// request without a valid token is answered 401 and not forwarded.
func (g *Gateway) tenant(w http.ResponseWriter, r *http.Request, provider string) (string, bool) {
	if g.auth.Open() {
		return ingestsvc.DefaultTenant, true
	}
	token := strings.TrimSpace(r.Header.Get(HeaderRecallToken))
	tenant, err := g.auth.TenantOf(token)
	if token == "" || errors.Is(err, ingestsvc.ErrUnauthenticated) || err != nil {
		g.stats.Refused.Add(1)
		writeError(w, provider, http.StatusUnauthorized, "authentication_error",
			"the Recall gateway needs a Recall token in the x-recall-token header (Claude Code: ANTHROPIC_CUSTOM_HEADERS=\"x-recall-token: <token>\")")
		return "", false
	}
	return tenant, true
}

// admit takes a slot of the request's lane (small or large body) for
// tenant, or answers 429 (over the tenant's share) or 503 (lane full) with
// Retry-After in the provider's error shape.
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, provider, tenant string) (func(), bool) {
	lane := g.small
	if r.ContentLength < 0 || r.ContentLength > g.cfg.LargeBodyBytes {
		lane = g.large
	}
	release, aerr := lane.Admit(tenant)
	if aerr == nil {
		return release, true
	}
	g.stats.Refused.Add(1)
	typ := "rate_limit_error"
	if aerr.Code == http.StatusServiceUnavailable {
		typ = "overloaded_error"
	}
	writeRetry(w, provider, aerr.Code, typ, "the Recall gateway is busy: "+aerr.Msg, aerr.RetryAfter)
	return nil, false
}

// Stats counts what the gateway did; every field is safe for concurrent
// use.
type Stats struct {
	Requests atomic.Int64 // requests to a provider prefix
	Refused  atomic.Int64 // refused: token, admission, body size
	// FailOpen counts requests forwarded unchanged because Recall could
	// not help (not connected, an error, a timeout).
	FailOpen atomic.Int64
	// Captured counts exchanges stored in the transcript; CaptureFailed
	// those that could not be (retried with the session's next request).
	Captured      atomic.Int64
	CaptureFailed atomic.Int64
	// Compacted counts requests answered from memory, Transparent those
	// forwarded with a compacted context.
	Compacted   atomic.Int64
	Transparent atomic.Int64
}

// Stats returns the gateway's counters.
func (g *Gateway) Stats() *Stats { return &g.stats }
