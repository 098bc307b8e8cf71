package ingestsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// SessionAPI proxies the session API over HTTP to the services that serve it
// on NATS: POST /v1/sessions/{session}/extract, POST .../compact, POST
// .../edit and GET .../memory become requests on
// events.APISubject(verb, tenant, session)
// with the HTTP body as the request body. Replies may be chunked
// (internal/chunked). A micro error's Nats-Service-Error-Code becomes the
// HTTP status; no responder is 503, no reply in time 504.
type SessionAPI struct {
	nc      *nats.Conn
	auth    *Auth
	timeout time.Duration
	maxBody int64
	tracer  trace.Tracer
}

// NewSessionAPI returns the session API proxy using nc.
func NewSessionAPI(nc *nats.Conn, auth *Auth, timeout time.Duration, maxBody int64) *SessionAPI {
	return &SessionAPI{nc: nc, auth: auth, timeout: timeout, maxBody: maxBody, tracer: otel.Tracer("recall/ingest")}
}

// Register adds the session routes to mux.
func (a *SessionAPI) Register(mux *http.ServeMux) {
	mux.Handle("POST /v1/sessions/{session}/extract", a.handler(events.VerbExtract))
	mux.Handle("POST /v1/sessions/{session}/compact", a.handler(events.VerbCompact))
	mux.Handle("POST /v1/sessions/{session}/edit", a.handler(events.VerbEdit))
	mux.Handle("GET /v1/sessions/{session}/memory", a.handler(events.VerbMemory))
}

func (a *SessionAPI) handler(verb string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := a.tracer.Start(ctx, r.Method+" /v1/sessions/{session}/"+verb, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		tenant, err := a.auth.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="recall"`)
			writeProblem(w, newProblem(ProblemUnauthenticated, http.StatusUnauthorized, err.Error()))
			return
		}
		session := r.PathValue("session")
		if err := events.ValidateID(session); err != nil {
			writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "session: "+err.Error()))
			return
		}
		span.SetAttributes(attribute.String("recall.tenant", tenant), attribute.String("recall.session", session))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeProblem(w, newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over %d bytes", a.maxBody)))
				return
			}
			writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "reading request body: "+err.Error()))
			return
		}
		if len(body) > 0 && !json.Valid(body) {
			writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "request body must be JSON"))
			return
		}
		rctx, cancel := context.WithTimeout(ctx, a.timeout)
		defer cancel()
		hdr := nats.Header{}
		natsce.Inject(rctx, hdr)
		subject := events.APISubject(verb, tenant, session)
		reply, err := chunked.Request(rctx, a.nc, subject, hdr, body)
		switch {
		case errors.Is(err, chunked.ErrNoResponders):
			writeProblem(w, newProblem(ProblemUnavailable, http.StatusServiceUnavailable, "no service answers "+verb+" requests right now; retry later"))
			return
		case errors.Is(err, context.DeadlineExceeded):
			writeProblem(w, newProblem(ProblemTimeout, http.StatusGatewayTimeout, fmt.Sprintf("no %s reply within %s", verb, a.timeout)))
			return
		case err != nil:
			writeProblem(w, newProblem(ProblemUpstream, http.StatusBadGateway, err.Error()))
			return
		}
		if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
			status, err := strconv.Atoi(code)
			if err != nil || status < 400 || status > 599 {
				status = http.StatusBadGateway
			}
			if ct := reply.Header.Get("Content-Type"); ct == MediaProblem && json.Valid(reply.Data) {
				w.Header().Set("Content-Type", MediaProblem)
				w.WriteHeader(status)
				_, _ = w.Write(reply.Data)
				return
			}
			p := newProblem(kindForStatus(status), status, reply.Header.Get(micro.ErrorHeader))
			writeProblem(w, p)
			return
		}
		ct := reply.Header.Get("Content-Type")
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(reply.Data)
	})
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
	case http.StatusServiceUnavailable:
		return ProblemUnavailable
	case http.StatusGatewayTimeout:
		return ProblemTimeout
	}
	return ProblemUpstream
}
