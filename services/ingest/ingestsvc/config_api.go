package ingestsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
)

// ConfigAPI serves tenant configuration over HTTP: GET /v1/config, PUT
// /v1/config (replace), PATCH /v1/config (JSON merge patch, RFC 7396) and
// GET /v1/config/history. A tenant token reads and writes its own tenant's;
// an operator token any tenant's, named by ?tenant= (required). Writes are
// validated by tenantcfg.Parse (422 with an error per field), take an
// optional If-Match: <revision> (412 when another is stored; "0": only
// when none is) and are stored with who wrote them and when. Every reply
// carries the revision as its ETag. Each request is bounded by
// configTimeout and ends with the client's. Services watching
// RECALL_CONFIG (tenantcfg.Watch) apply a write within a round trip.
type ConfigAPI struct {
	ops    configOps
	auth   *Auth
	limits Limits
}

// NewConfigAPI returns the configuration API over js; history pages are
// read over bulk (a connection of its own), writes are checked against
// lim.
func NewConfigAPI(js, bulk jetstream.JetStream, lim tenantcfg.Ceilings, auth *Auth, limits Limits) *ConfigAPI {
	return &ConfigAPI{ops: configOps{js: js, bulk: bulk, lim: lim}, auth: auth, limits: limits}
}

// Register adds the configuration routes to mux.
func (a *ConfigAPI) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/config", a.get)
	mux.HandleFunc("PUT /v1/config", a.write(events.ConfigOpPut))
	mux.HandleFunc("PATCH /v1/config", a.write(events.ConfigOpPatch))
	mux.HandleFunc("GET /v1/config/history", a.history)
}

// begin authenticates and admits a configuration request and resolves
// its tenant and actor; when it cannot be served it has answered.
func (a *ConfigAPI) begin(w http.ResponseWriter, r *http.Request, route string) (tenant, actor string, release func(), ok bool) {
	ident, err := a.auth.Identify(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="recall"`)
		writeProblem(w, newProblem(ProblemUnauthenticated, http.StatusUnauthorized, err.Error()))
		return "", "", nil, false
	}
	tenant, actor, q := ident.Tenant, events.ConfigActorTenant, r.URL.Query().Get("tenant")
	switch {
	case ident.Operator && q == "" && a.auth.Open():
		tenant, actor = DefaultTenant, events.ConfigActorOperator
	case ident.Operator && q == "":
		writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "an operator token names the tenant: add ?tenant=<tenant>"))
		return "", "", nil, false
	case ident.Operator:
		tenant, actor = q, events.ConfigActorOperator
	case q != "" && q != tenant:
		writeProblem(w, newProblem(ProblemTenantMismatch, http.StatusForbidden, "a tenant token reads and writes its own tenant's configuration only"))
		return "", "", nil, false
	}
	if err := events.ValidateID(tenant); err != nil {
		writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "tenant: "+err.Error()))
		return "", "", nil, false
	}
	lane := calls // writes and history pages (up to 1 MiB each)
	if route == "GET /v1/config" {
		lane = reads
	}
	release, ok = admit(r.Context(), w, a.limits.adm.lane(lane), tenant, route)
	return tenant, actor, release, ok
}

func (a *ConfigAPI) get(w http.ResponseWriter, r *http.Request) {
	tenant, _, release, ok := a.begin(w, r, "GET /v1/config")
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), configTimeout)
	defer cancel()
	res, p := a.ops.get(ctx, tenant)
	writeConfig(w, http.StatusOK, res, p)
}

func (a *ConfigAPI) history(w http.ResponseWriter, r *http.Request) {
	tenant, _, release, ok := a.begin(w, r, "GET /v1/config/history")
	if !ok {
		return
	}
	defer release()
	var req events.ConfigHistoryRequest
	q := r.URL.Query()
	for _, v := range []struct {
		name string
		to   func(uint64)
	}{{"before", func(n uint64) { req.Before = n }}, {"limit", func(n uint64) { req.Limit = int(min(n, 1<<20)) }}} {
		if s := q.Get(v.name); s != "" {
			n, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, v.name+" must be a whole number"))
				return
			}
			v.to(n)
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), configTimeout)
	defer cancel()
	res, p := a.ops.history(ctx, tenant, req)
	if p != nil {
		writeConfigProblem(w, p)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(mustJSON(res))
}

// write serves PUT (op put) and PATCH (op patch).
func (a *ConfigAPI) write(op string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		route := r.Method + " /v1/config"
		tenant, actor, release, ok := a.begin(w, r, route)
		if !ok {
			return
		}
		defer release()
		pre, p := ifMatch(r.Header.Get("If-Match"))
		if p != nil {
			writeProblem(w, p)
			return
		}
		body, ok := a.readBody(w, r, tenant, route)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), configTimeout)
		defer cancel()
		res, cp := a.ops.write(ctx, tenant, op, body, events.ConfigMeta{Actor: actor, Via: "http"}, pre)
		writeConfig(w, http.StatusOK, res, cp)
	}
}

// readBody reads a JSON request body within the limits; when it cannot,
// it has answered.
// A configuration is at most the ceiling's ConfigBytes: a larger body is
// refused with 413 naming it.
func (a *ConfigAPI) readBody(w http.ResponseWriter, r *http.Request, tenant, route string) ([]byte, bool) {
	limit := min(a.limits.MaxBodyBytes, int64(a.ops.lim.Resolved().ConfigBytes))
	if r.ContentLength > limit {
		writeProblem(w, newProblem(ProblemTooLarge, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is %d bytes, at most %d allowed (RECALL_TENANT_MAX_CONFIG_BYTES)", r.ContentLength, limit)))
		return nil, false
	}
	release, ok := a.limits.adm.admitBody(r.Context(), w, r, tenant, route)
	if !ok {
		return nil, false
	}
	defer release()
	a.limits.setBodyDeadline(w)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if p := readProblem(err); p != nil {
			writeProblem(w, p.Problem)
		} else {
			writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "reading request body: "+err.Error()))
		}
		return nil, false
	}
	if !json.Valid(body) {
		writeProblem(w, newProblem(ProblemInvalidBody, http.StatusBadRequest, "request body must be a JSON object"))
		return nil, false
	}
	return body, true
}

// ifMatch parses an If-Match header: empty (unconditional), a revision
// ("12", quoted or weak too), "0" (only when none is stored) or "*"
// (only when one is stored).
func ifMatch(h string) (tenantcfg.Precondition, *events.Problem) {
	h = strings.TrimSpace(h)
	if h == "" {
		return tenantcfg.Precondition{}, nil
	}
	if h == "*" {
		return tenantcfg.Precondition{Exists: true}, nil
	}
	n, err := strconv.ParseUint(strings.Trim(strings.TrimPrefix(h, "W/"), `"`), 10, 64)
	if err != nil {
		return tenantcfg.Precondition{}, newProblem(ProblemInvalidBody, http.StatusBadRequest, "If-Match must be a revision (the ETag of GET /v1/config), \"0\" or \"*\"")
	}
	if n == 0 {
		return tenantcfg.Precondition{None: true}, nil
	}
	return tenantcfg.Precondition{Revision: n}, nil
}

// writeConfig answers a ConfigReply with its revision as the ETag, or p.
func writeConfig(w http.ResponseWriter, status int, res events.ConfigReply, p *events.Problem) {
	if p != nil {
		writeConfigProblem(w, p)
		return
	}
	w.Header().Set("ETag", strconv.Quote(strconv.FormatUint(res.Revision, 10)))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(res))
}

func writeConfigProblem(w http.ResponseWriter, p *events.Problem) {
	w.Header().Set("Content-Type", MediaProblem)
	w.WriteHeader(p.Status)
	_, _ = w.Write(mustJSON(p))
}
