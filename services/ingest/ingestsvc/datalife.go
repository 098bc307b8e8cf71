package ingestsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/recallhq/recall/internal/erase"
	"github.com/recallhq/recall/internal/export"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
)

// Problem types of the data lifecycle.
const (
	// ProblemGone: an event for an erased session (410).
	ProblemGone = "gone"
	// ProblemNotFound: nothing to export (404).
	ProblemNotFound = "not-found"
)

// eraseTimeout bounds one erase over NATS.
const eraseTimeout = 2 * time.Minute

// EraseEndpointSubject is the subject the NATS erase endpoint serves:
// recall.api.erase.<tenant>.<session>.
const EraseEndpointSubject = events.SubjectAPIRoot + "." + events.VerbErase + ".*.*"

// DataAPI serves the data lifecycle over HTTP: DELETE
// /v1/sessions/{session}, DELETE /v1/users/{user}[?sessions=true], GET
// /v1/sessions/{session}/export[?part=notes] and GET
// /v1/users/{user}/export. A tenant token acts on its own tenant; an
// operator token on the tenant named by ?tenant= (every tenant's data).
// Erases and exports take a slot of the expensive-call lane; exports read
// on the bulk-read connection.
type DataAPI struct {
	eraser *erase.Eraser
	nc     *nats.Conn    // bulk reads (the transcript)
	layout events.Layout // the transcript's shards
	js     jetstream.JetStream
	auth   *Auth
	limits Limits
	log    *slog.Logger
}

// startEraser starts the eraser and its guard (until the lifecycle's
// stop, once the requests in flight ended) and makes ingest refuse the
// events of erased sessions.
// The eraser has a connection of its own: its guard follows the headers
// of every transcript record, which must not share the publishing lane.
//
// Starting the guard is retried within the start's ctx (provision.Startup):
// on a cluster just formed, the tombstones bucket may have no leader yet
// and its watch times out ("context deadline exceeded").
func (s *Service) startEraser(ctx context.Context) error {
	var err error
	if s.eraseNC, err = s.life.Connect("recall-ingest-eraser"); err != nil {
		return err
	}
	js, err := jetstream.New(s.eraseNC)
	if err != nil {
		return fmt.Errorf("opening JetStream for the eraser: %w", err)
	}
	s.eraser = erase.New(js, s.cfg.Layout(), s.cfg.Erase, nil, s.log)
	// The guard outlives the start: it ends with the service (s.live).
	gctx := s.live
	err = provision.Startup.Do(ctx, s.log, "starting the erase guard", func(context.Context) error { return s.eraser.Guard(gctx) })
	if err != nil {
		return fmt.Errorf("starting the erase guard: %w", err)
	}
	s.in.erased = s.eraser.Tombstones().Erased
	if s.cfg.Retention.Interval > 0 {
		go s.sweep(gctx)
	}
	return nil
}

// sweep runs the retention sweeper over the live tenant configurations
// until ctx is done.
func (s *Service) sweep(ctx context.Context) {
	cfgs, err := tenantcfg.Watch(ctx, s.eraser.JetStream(), s.log)
	if err != nil {
		return // ctx ended
	}
	host, _ := os.Hostname()
	s.eraser.Sweeper(s.cfg.Retention, fmt.Sprintf("%s-%d", host, os.Getpid()), cfgs.Retentions).Run(ctx)
}

// dataAPI is the lifecycle API over the console's bulk-read connection.
func (s *Service) dataAPI(auth *Auth, limits Limits) *DataAPI {
	return &DataAPI{eraser: s.eraser, nc: s.conNC, layout: s.cfg.Layout(), auth: auth, limits: limits, log: s.log}
}

// Register adds the lifecycle routes to mux; it fails only when the
// bulk-read connection has no JetStream.
func (a *DataAPI) Register(mux *http.ServeMux) error {
	js, err := jetstream.New(a.nc)
	if err != nil {
		return fmt.Errorf("opening JetStream for exports: %w", err)
	}
	a.js = js
	mux.HandleFunc("DELETE /v1/sessions/{session}", a.eraseSession)
	mux.HandleFunc("DELETE /v1/users/{user}", a.eraseUser)
	mux.HandleFunc("GET /v1/sessions/{session}/export", a.exportSession)
	mux.HandleFunc("GET /v1/users/{user}/export", a.exportUser)
	return nil
}

// begin authenticates and admits a lifecycle request and validates the id
// of path value name; when it cannot be served it has answered.
func (a *DataAPI) begin(w http.ResponseWriter, r *http.Request, route, name string) (tenant, id string, by erase.Actor, release func(), ok bool) {
	ident, err := a.auth.Identify(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="recall"`)
		writeProblem(w, newProblem(ProblemUnauthenticated, http.StatusUnauthorized, err.Error()))
		return "", "", by, nil, false
	}
	tenant, q := ident.Tenant, r.URL.Query().Get("tenant")
	switch {
	case ident.Operator && q == "" && a.auth.Open():
		tenant, by.Operator = DefaultTenant, true
	case ident.Operator && q == "":
		writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "an operator token names the tenant: add ?tenant=<tenant>"))
		return "", "", by, nil, false
	case ident.Operator:
		tenant, by.Operator = q, true
	case q != "" && q != tenant:
		writeProblem(w, newProblem(ProblemTenantMismatch, http.StatusForbidden, "a tenant token acts on its own tenant only"))
		return "", "", by, nil, false
	}
	id = r.PathValue(name)
	for _, v := range [][2]string{{"tenant", tenant}, {name, id}} {
		if err := events.ValidateID(v[1]); err != nil {
			writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, v[0]+": "+err.Error()))
			return "", "", by, nil, false
		}
	}
	release, ok = admit(r.Context(), w, a.limits.adm.lane(calls), tenant, route)
	return tenant, id, by, release, ok
}

func (a *DataAPI) eraseSession(w http.ResponseWriter, r *http.Request) {
	tenant, session, by, release, ok := a.begin(w, r, "DELETE /v1/sessions/{session}", "session")
	if !ok {
		return
	}
	defer release()
	rec, err := a.eraser.Session(r.Context(), tenant, session, by)
	a.answer(w, r.Context(), rec, err)
}

func (a *DataAPI) eraseUser(w http.ResponseWriter, r *http.Request) {
	tenant, user, by, release, ok := a.begin(w, r, "DELETE /v1/users/{user}", "user")
	if !ok {
		return
	}
	defer release()
	sessions, _ := strconv.ParseBool(r.URL.Query().Get("sessions"))
	rec, err := a.eraser.User(r.Context(), tenant, user, sessions, by)
	a.answer(w, r.Context(), rec, err)
}

// answer writes an erase receipt, or the problem of its error.
func (a *DataAPI) answer(w http.ResponseWriter, ctx context.Context, rec events.EraseReceipt, err error) {
	if err != nil {
		a.log.WarnContext(ctx, "erase failed; erasing again completes it", "tenant", rec.Tenant, "session", rec.Session, "user", rec.User, "err", err)
		writeProblem(w, eraseProblem(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(mustJSON(rec))
}

func eraseProblem(err error) *events.Problem {
	if errors.Is(err, erase.ErrInvalid) {
		return newProblem(ProblemInvalidBody, http.StatusBadRequest, err.Error())
	}
	return newProblem(ProblemUnavailable, http.StatusServiceUnavailable, "erasing: "+err.Error()+"; nothing is restored by a failed erase: erase again to complete it")
}

func (a *DataAPI) exportSession(w http.ResponseWriter, r *http.Request) {
	tenant, session, _, release, ok := a.begin(w, r, "GET /v1/sessions/{session}/export", "session")
	if !ok {
		return
	}
	defer release()
	switch part := r.URL.Query().Get("part"); part {
	case "", "transcript":
		_, err := export.SessionJSONL(r.Context(), a.nc, a.layout, tenant, session, w, func() {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", session+".jsonl"))
		})
		if err != nil && errors.Is(err, export.ErrNotFound) {
			writeProblem(w, newProblem(ProblemNotFound, http.StatusNotFound, "session "+session+" has no records"))
		} else if err != nil {
			a.log.WarnContext(r.Context(), "export failed", "tenant", tenant, "session", session, "err", err)
		}
	case "notes":
		n, err := export.SessionNotes(r.Context(), a.js, tenant, session)
		a.writeExport(w, n, err, "session "+session+" has no notes and no index entry")
	default:
		writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, fmt.Sprintf("part %q: want transcript (default) or notes", part)))
	}
}

func (a *DataAPI) exportUser(w http.ResponseWriter, r *http.Request) {
	tenant, user, _, release, ok := a.begin(w, r, "GET /v1/users/{user}/export", "user")
	if !ok {
		return
	}
	defer release()
	u, err := export.User(r.Context(), a.js, tenant, user)
	a.writeExport(w, u, err, "user "+user+" has no long-term memory")
}

func (a *DataAPI) writeExport(w http.ResponseWriter, v any, err error, notFound string) {
	switch {
	case errors.Is(err, export.ErrNotFound):
		writeProblem(w, newProblem(ProblemNotFound, http.StatusNotFound, notFound))
	case err != nil:
		writeProblem(w, newProblem(ProblemUnavailable, http.StatusServiceUnavailable, "exporting: "+err.Error()))
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(v))
	}
}

// eraseEndpoint is the NATS erase endpoint: the tenant and the session
// come from the subject (NATS permissions confine a tenant user to its
// own); the reply is the events.EraseReceipt, or a micro error with the
// HTTP status and a Problem. An erase (a drain, purges: up to
// eraseTimeout) answers later, admitted per tenant in adm (the HTTP
// edge's lane of erases), under the service's run context with the
// caller's trace and a span of its own; shutdown awaits it.
func eraseEndpoint(e *erase.Eraser, adm *microapi.Admission, tracer trace.Tracer) microapi.Endpoint {
	return microapi.Endpoint{Verb: events.VerbErase, Subject: EraseEndpointSubject, Mode: microapi.AnswerLater, Admission: adm,
		Handle: func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
			ctx, span := tracer.Start(ctx, "erase "+events.SubjectAPIRoot+"."+events.VerbErase, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("recall.tenant", r.Tenant), attribute.String("recall.session", r.Session)),
				trace.WithAttributes(telemetry.MemoryOp(telemetry.OpDeleteMemory, events.BucketMemory, r.Session)...))
			defer span.End()
			ctx, cancel := context.WithTimeout(ctx, eraseTimeout)
			defer cancel()
			rec, err := e.Session(ctx, r.Tenant, r.Session, erase.Actor{})
			if err != nil {
				span.RecordError(err)
				return nil, problemError(eraseProblem(err))
			}
			return rec, nil
		}}
}
