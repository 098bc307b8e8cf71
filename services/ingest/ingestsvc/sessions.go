package ingestsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// SessionAPI proxies the session API over HTTP to the services that serve it
// on NATS: POST /v1/sessions/{session}/extract, POST .../compact, POST
// .../edit and GET .../memory become requests on
// events.APISubject(verb, tenant, session)
// with the HTTP body as the request body. Replies may be chunked
// (pkg/chunked). A micro error's Nats-Service-Error-Code becomes the
// HTTP status; no responder is 503, no reply in time 504.
type SessionAPI struct {
	nc      *nats.Conn
	auth    *Auth
	timeout time.Duration
	limits  Limits
	tracer  trace.Tracer
}

// NewSessionAPI returns the session API proxy using nc. Request bodies obey
// limits (size, read deadline, bodies in flight) like POST /v1/events, and
// must also fit in one NATS message (413 otherwise).
func NewSessionAPI(nc *nats.Conn, auth *Auth, timeout time.Duration, limits Limits) *SessionAPI {
	return &SessionAPI{nc: nc, auth: auth, timeout: timeout, limits: limits, tracer: otel.Tracer("recall/ingest")}
}

// Register adds the session routes to mux.
func (a *SessionAPI) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/sessions/{session}/extract", a.handler(events.VerbExtract))
	mux.Handle("POST /v1/sessions/{session}/compact", a.handler(events.VerbCompact))
	mux.Handle("POST /v1/sessions/{session}/edit", a.handler(events.VerbEdit))
	mux.Handle("GET /v1/sessions/{session}/memory", a.handler(events.VerbMemory))
	// The session index (services/indexer).
	mux.Handle("GET /v1/sessions/{session}/index", a.handler(events.VerbIndex))
	mux.Handle("POST /v1/sessions/{session}/index", a.handler(events.VerbReindex))
	mux.Handle("POST /v1/sessions/{session}/query", a.handler(events.VerbQuery))
	mux.Handle("GET /v1/sessions", a.tenantHandler(events.VerbSessions, "/v1/sessions", sessionsQuery))
	mux.Handle("GET /v1/resolve", a.tenantHandler(events.VerbResolve, "/v1/resolve", resolveQuery))
	mux.Handle("POST /v1/resolve", a.tenantHandler(events.VerbResolve, "/v1/resolve", nil))
	// Long-term memory (services/longterm).
	mux.Handle("POST /v1/sessions/{session}/commit", a.handler(events.VerbCommit))
	mux.Handle("GET /v1/users/{user}/memory", a.userHandler(events.VerbLTM))
}

// userHandler forwards a verb addressing a user (its session token is the
// user id); GET's types= (comma-separated) becomes the body.
func (a *SessionAPI) userHandler(verb string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := r.Method + " /v1/users/{user}/memory"
		ctx, span, tenant, ok := a.begin(w, r, route)
		defer span.End()
		if !ok {
			return
		}
		release, ok := admit(ctx, w, a.limits.adm.lane(reads), tenant, route)
		if !ok {
			return
		}
		defer release()
		user := r.PathValue("user")
		if err := events.ValidateID(user); err != nil {
			writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "user: "+err.Error()))
			return
		}
		var req events.LTMRequest
		for _, t := range strings.Split(r.URL.Query().Get("types"), ",") {
			if t = strings.TrimSpace(t); t != "" {
				req.Types = append(req.Types, t)
			}
		}
		body, _ := json.Marshal(req)
		reply, p := a.forward(ctx, verb, tenant, user, body)
		if p != nil {
			writeProblem(w, p)
			return
		}
		writeReply(w, reply)
	})
}

// sessionsQuery turns GET /v1/sessions?q=&tag=&limit=&cursor= into a
// SessionsRequest body.
func sessionsQuery(r *http.Request) ([]byte, *events.Problem) {
	q := r.URL.Query()
	req := events.SessionsRequest{Q: q.Get("q"), Tag: q.Get("tag"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return nil, newProblem(ProblemInvalidBody, http.StatusBadRequest, "limit must be a positive integer")
		}
		req.Limit = n
	}
	b, _ := json.Marshal(req)
	return b, nil
}

// resolveQuery turns GET /v1/resolve?ref= into a ResolveRequest body.
func resolveQuery(r *http.Request) ([]byte, *events.Problem) {
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		return nil, newProblem(ProblemInvalidBody, http.StatusBadRequest, "ref is required (a session id or name, optionally with ~N)")
	}
	b, _ := json.Marshal(events.ResolveRequest{Ref: ref})
	return b, nil
}

// tenantHandler forwards a tenant-wide verb (session token
// events.TenantScope); fromQuery, when set, builds the body from the URL
// (GET), else the request body is forwarded.
func (a *SessionAPI) tenantHandler(verb, route string, fromQuery func(*http.Request) ([]byte, *events.Problem)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span, tenant, ok := a.begin(w, r, r.Method+" "+route)
		defer span.End()
		if !ok {
			return
		}
		release, ok := admit(ctx, w, a.limits.adm.lane(calls), tenant, r.Method+" "+route)
		if !ok {
			return
		}
		defer release()
		var body []byte
		if fromQuery != nil {
			var p *events.Problem
			if body, p = fromQuery(r); p != nil {
				writeProblem(w, p)
				return
			}
		} else if body, ok = a.readBody(ctx, w, r, tenant, r.Method+" "+route); !ok {
			return
		}
		reply, p := a.forward(ctx, verb, tenant, events.TenantScope, body)
		if p != nil {
			writeProblem(w, p)
			return
		}
		writeReply(w, reply)
	})
}

// begin starts the span of an API request and authenticates it; when it
// cannot, it has answered and ok is false.
func (a *SessionAPI) begin(w http.ResponseWriter, r *http.Request, name string) (context.Context, trace.Span, string, bool) {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := a.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	tenant, err := a.auth.Authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="recall"`)
		writeProblem(w, newProblem(ProblemUnauthenticated, http.StatusUnauthorized, err.Error()))
		return ctx, span, "", false
	}
	span.SetAttributes(attribute.String("recall.tenant", tenant))
	return ctx, span, tenant, true
}

func (a *SessionAPI) handler(verb string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := r.Method + " /v1/sessions/{session}/" + verb
		ctx, span, tenant, ok := a.begin(w, r, route)
		defer span.End()
		if !ok {
			return
		}
		release, ok := admit(ctx, w, a.limits.adm.lane(laneOf(verb)), tenant, route)
		if !ok {
			return
		}
		defer release()
		session := r.PathValue("session")
		if err := events.ValidateID(session); err != nil {
			writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "session: "+err.Error()))
			return
		}
		span.SetAttributes(attribute.String("recall.session", session))
		body, ok := a.readBody(ctx, w, r, tenant, route)
		if !ok {
			return
		}
		reply, p := a.forward(ctx, verb, tenant, session, body)
		if p != nil {
			writeProblem(w, p)
			return
		}
		writeReply(w, reply)
	})
}

// readBody reads the request body within the limits; it must fit in one
// NATS message and be JSON without duplicate member names (or be empty).
// When it cannot, readBody has answered the request and returns false.
func (a *SessionAPI) readBody(ctx context.Context, w http.ResponseWriter, r *http.Request, tenant, route string) ([]byte, bool) {
	body, p := a.readBodyProblem(ctx, w, r, tenant, route)
	if p != nil {
		writeProblem(w, p)
	}
	return body, p == nil && body != nil
}

// readBodyProblem returns the body, or the problem to answer, or (nil, nil)
// when admission to a body lane has answered (429 or 503) already.
func (a *SessionAPI) readBodyProblem(ctx context.Context, w http.ResponseWriter, r *http.Request, tenant, route string) ([]byte, *events.Problem) {
	limit := a.limits.MaxBodyBytes
	if natsMax := int64(chunked.ChunkSize(a.nc)); natsMax < limit {
		limit = natsMax
	}
	if r.ContentLength > limit {
		return nil, newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is %d bytes, at most %d allowed", r.ContentLength, limit))
	}
	release, ok := a.limits.adm.admitBody(ctx, w, r, tenant, route)
	if !ok {
		return nil, nil // answered 429 or 503
	}
	defer release()
	a.limits.setBodyDeadline(w)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if body == nil {
		body = []byte{}
	}
	if err != nil {
		if p := readProblem(err); p != nil {
			return nil, p.Problem
		}
		return nil, newProblem(ProblemInvalidBody, http.StatusBadRequest, "reading request body: "+err.Error())
	}
	if len(body) > 0 {
		if !json.Valid(body) {
			return nil, newProblem(ProblemInvalidBody, http.StatusBadRequest, "request body must be JSON")
		}
		if err := checkJSON(body, events.MaxDepth); err != nil {
			return nil, newProblem(ProblemInvalidBody, http.StatusBadRequest, "request body: "+err.Error())
		}
	}
	return body, nil
}

// Lanes of the session API (see Admission).
var (
	calls = func(a *Admission) *microapi.Admission { return a.Calls }
	reads = func(a *Admission) *microapi.Admission { return a.Reads }
)

// laneOf is the admission lane of a session verb: small reads (GET memory,
// GET index) in the reads lane, everything else is a call.
func laneOf(verb string) func(*Admission) *microapi.Admission {
	if verb == events.VerbMemory || verb == events.VerbIndex {
		return reads
	}
	return calls
}

// forward sends the request to the service serving verb and returns its
// reassembled reply, or the problem to answer.
func (a *SessionAPI) forward(ctx context.Context, verb, tenant, session string, body []byte) (*nats.Msg, *events.Problem) {
	rctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	hdr := nats.Header{}
	natsce.Inject(rctx, hdr)
	reply, err := chunked.Request(rctx, a.nc, events.APISubject(verb, tenant, session), hdr, body)
	switch {
	case errors.Is(err, chunked.ErrNoResponders):
		return nil, newProblem(ProblemUnavailable, http.StatusServiceUnavailable, "no service answers "+verb+" requests right now; retry later")
	case errors.Is(err, context.DeadlineExceeded):
		return nil, newProblem(ProblemTimeout, http.StatusGatewayTimeout, fmt.Sprintf("no %s reply within %s", verb, a.timeout))
	case errors.Is(err, nats.ErrMaxPayload):
		return nil, newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, "request body does not fit in one NATS message: "+err.Error())
	case err != nil:
		return nil, newProblem(ProblemUpstream, http.StatusBadGateway, err.Error())
	}
	return reply, nil
}

// writeReply answers with a service's reply: a micro error's code becomes
// the HTTP status (its problem body passed through when it is one), and a
// 429 or 503 keeps the service's Retry-After.
func writeReply(w http.ResponseWriter, reply *nats.Msg) {
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		status, err := strconv.Atoi(code)
		if err != nil || status < 400 || status > 599 {
			status = http.StatusBadGateway
		}
		if ra := reply.Header.Get("Retry-After"); ra != "" && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
			w.Header().Set("Retry-After", ra)
		}
		if ct := reply.Header.Get("Content-Type"); ct == MediaProblem && json.Valid(reply.Data) {
			w.Header().Set("Content-Type", MediaProblem)
			w.WriteHeader(status)
			_, _ = w.Write(reply.Data)
			return
		}
		writeProblem(w, newProblem(kindForStatus(status), status, reply.Header.Get(micro.ErrorHeader)))
		return
	}
	ct := reply.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(reply.Data)
}

// kindForStatus names the problem type of an upstream error status.
func kindForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return ProblemInvalidBody
	case http.StatusNotFound:
		return "not-found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusUnprocessableEntity:
		return "unprocessable"
	case http.StatusRequestEntityTooLarge:
		return ProblemTooLarge
	case http.StatusTooManyRequests:
		return ProblemTooManyRequests
	case http.StatusServiceUnavailable:
		return ProblemUnavailable
	case http.StatusGatewayTimeout:
		return ProblemTimeout
	}
	return ProblemUpstream
}
