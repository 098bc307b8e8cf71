// Package console is Recall's operator console: a small web application
// served by the HTTP edge at /console/, with the edge's authentication. A
// tenant's token sees that tenant only; an operator token
// (RECALL_OPERATOR_TOKENS) sees every tenant and may act (replay parked
// extractions). Pages: sessions; a session (memory as markdown, revisions
// with side-by-side diffs, context tokens over the transcript with
// extraction points and compaction boundaries over the whole session, the
// timeline of its lifecycle events, its parent, children, the sessions it
// referenced with @@ and those whose index entry records a reference to it,
// the tokens and cost of each extraction, a preview of what a compaction
// would keep now, its transcript a page at a time with the blocks a
// context edit would clear marked); a user's long-term memory;
// parked failures; for operators, every tenant at a glance. Live updates
// are server-sent events from RECALL_EVENTS, one stream per browser and
// token (the tabs share it). The assets are embedded; nothing is fetched
// from elsewhere. See docs/console.md.
package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm/prices"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

//go:embed assets
var assets embed.FS

// Identity is who a request comes from.
type Identity struct {
	// Tenant is the tenant of a tenant token ("" for an operator).
	Tenant string `json:"tenant,omitempty"`
	// Operator tokens see every tenant and may act.
	Operator bool `json:"operator"`
}

// Sees reports whether id may read tenant's data.
func (id Identity) Sees(tenant string) bool { return id.Operator || id.Tenant == tenant }

// Authenticator identifies a request, or fails (401).
type Authenticator func(*http.Request) (Identity, error)

// Config configures the console.
type Config struct {
	// Tenants are the tenants an operator may pick.
	Tenants []string
	// Timeout bounds one API call to another service (the compaction
	// preview).
	Timeout time.Duration
	Log     *slog.Logger
	// Admit, when set, admits a read of tenant's data at endpoint (the
	// session list and page, the preview, parked lists) before any work:
	// the edge's per-tenant and global bound. When it refuses it has
	// answered (429 or 503 with Retry-After) and ok is false.
	Admit Admitter
	// Prices prices the extractions of a session's memory (nil: the
	// built-in table of internal/llm/prices).
	Prices prices.Table
}

// Admitter admits a request reading tenant's data; see Config.Admit.
type Admitter func(w http.ResponseWriter, r *http.Request, tenant, endpoint string) (release func(), ok bool)

// Console serves the console.
type Console struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	auth      Authenticator
	layout    events.Layout // the transcript's shards
	series    lru[series]
	timelines lru[timeline]
	lineages  lru[lineage] // by tenant
	prices    prices.Table
	cfg       Config
	// closing ends the live streams (Close), which would otherwise hold a
	// graceful HTTP shutdown until its deadline.
	closing   chan struct{}
	closeOnce sync.Once
	// streams bounds the open live streams (per tenant, operators as one).
	streams *microapi.Admission
}

// Close ends the live streams; register it with http.Server.RegisterOnShutdown.
func (c *Console) Close() { c.closeOnce.Do(func() { close(c.closing) }) }

// New returns the console reading through nc the transcript stored in
// layout's shards. Its reads can be large (transcripts, listings): give it
// a connection of its own, not one that carries control traffic.
func New(nc *nats.Conn, layout events.Layout, auth Authenticator, cfg Config) (*Console, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Admit == nil {
		cfg.Admit = func(http.ResponseWriter, *http.Request, string, string) (func(), bool) { return func() {}, true }
	}
	if cfg.Prices == nil {
		cfg.Prices = prices.Default()
	}
	cfg.Tenants = slices.Compact(slices.Sorted(slices.Values(cfg.Tenants)))
	return &Console{nc: nc, js: js, auth: auth, layout: layout, series: lru[series]{max: 32}, timelines: lru[timeline]{max: 32},
		lineages: lru[lineage]{max: 8}, prices: cfg.Prices, cfg: cfg, closing: make(chan struct{}),
		streams: microapi.NewAdmission(maxStreamsPer, maxStreams, 10*time.Second)}, nil
}

// admit admits a read of tenant's data ("" for every tenant's) at
// endpoint; see Config.Admit.
func (c *Console) admit(w http.ResponseWriter, r *http.Request, tenant, endpoint string) (release func(), ok bool) {
	if tenant == "" {
		tenant = "*"
	}
	return c.cfg.Admit(w, r, tenant, endpoint)
}

// Register adds the console's routes to mux.
func (c *Console) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	mux.Handle("GET /console/", http.StripPrefix("/console/", noStore(files)))
	mux.HandleFunc("GET /console/api/whoami", c.whoami)
	mux.HandleFunc("GET /console/api/tenants/{tenant}/sessions", c.sessions)
	mux.HandleFunc("GET /console/api/tenants/{tenant}/sessions/{session}", c.session)
	mux.HandleFunc("POST /console/api/tenants/{tenant}/sessions/{session}/preview", c.preview)
	mux.HandleFunc("POST /console/api/tenants/{tenant}/sessions/{session}/edit", c.edit)
	mux.HandleFunc("GET /console/api/tenants/{tenant}/sessions/{session}/transcript", c.transcriptPage)
	mux.HandleFunc("GET /console/api/tenants/{tenant}/users/{user}/memory", c.userMemory)
	mux.HandleFunc("GET /console/api/overview", c.overview)
	mux.HandleFunc("GET /console/api/parked", c.parked)
	mux.HandleFunc("POST /console/api/parked/replay", c.replay)
	mux.HandleFunc("GET /console/api/live", c.live)
}

// noStore keeps browsers from caching an old console after an upgrade.
func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.ServeHTTP(w, r)
	})
}

// identify authenticates r; when it cannot it answers 401.
func (c *Console) identify(w http.ResponseWriter, r *http.Request) (Identity, bool) {
	id, err := c.auth(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="recall"`)
		fail(w, http.StatusUnauthorized, err.Error())
		return id, false
	}
	return id, true
}

// tenantOf authenticates r and checks it may read the {tenant} of its path.
func (c *Console) tenantOf(w http.ResponseWriter, r *http.Request) (Identity, string, bool) {
	id, ok := c.identify(w, r)
	if !ok {
		return id, "", false
	}
	tenant := r.PathValue("tenant")
	if err := events.ValidateID(tenant); err != nil {
		fail(w, http.StatusBadRequest, "tenant: "+err.Error())
		return id, "", false
	}
	if !id.Sees(tenant) {
		fail(w, http.StatusForbidden, "this token sees tenant "+id.Tenant+" only")
		return id, "", false
	}
	return id, tenant, true
}

// sessionOf authenticates r and checks it may read the {tenant} of its
// path, whose {session} must be a valid id.
func (c *Console) sessionOf(w http.ResponseWriter, r *http.Request) (tenant, session string, ok bool) {
	_, tenant, ok = c.tenantOf(w, r)
	if !ok {
		return "", "", false
	}
	session = r.PathValue("session")
	if err := events.ValidateID(session); err != nil {
		fail(w, http.StatusBadRequest, "session: "+err.Error())
		return "", "", false
	}
	return tenant, session, true
}

// scopeOf authenticates r and returns the tenant it reads: a tenant token's
// own; for an operator the ?tenant= asked for, "" meaning every tenant.
func (c *Console) scopeOf(w http.ResponseWriter, r *http.Request) (Identity, string, bool) {
	id, ok := c.identify(w, r)
	if !ok {
		return id, "", false
	}
	if !id.Operator {
		return id, id.Tenant, true
	}
	tenant := r.URL.Query().Get("tenant")
	if tenant != "" {
		if err := events.ValidateID(tenant); err != nil {
			fail(w, http.StatusBadRequest, "tenant: "+err.Error())
			return id, "", false
		}
	}
	return id, tenant, true
}

func (c *Console) whoami(w http.ResponseWriter, r *http.Request) {
	id, ok := c.identify(w, r)
	if !ok {
		return
	}
	tenants := []string{id.Tenant}
	if id.Operator {
		tenants = c.cfg.Tenants
	}
	// LiveStreams is how many live streams this edge holds open for the
	// token's tenant (every operator's, for an operator): the tabs of a
	// browser share one, and a page left for the back/forward cache
	// closes its own.
	open, _ := c.streams.InFlight(streamKey(id))
	writeJSON(w, struct {
		Identity
		Tenants     []string `json:"tenants"`
		LiveStreams int      `json:"live_streams"`
	}{id, tenants, open})
}

// fail answers an RFC 9457 problem.
func fail(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": events.ProblemTypeBase + "console", "title": http.StatusText(status), "status": status, "detail": detail})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// unavailable answers 503 for a NATS error, 500 otherwise.
func unavailable(w http.ResponseWriter, err error) {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, transcript.ErrNoResponders) || errors.Is(err, nats.ErrNoResponders) {
		fail(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	fail(w, http.StatusInternalServerError, err.Error())
}
