package ingestsvc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
)

// Problem types of the configuration API.
const (
	// ProblemInvalidConfig: a configuration with invalid fields (422); the
	// problem's errors list them.
	ProblemInvalidConfig = "invalid-config"
	// ProblemRevisionMismatch: If-Match (if_revision) names a revision
	// that is not the stored one (412).
	ProblemRevisionMismatch = "revision-mismatch"
)

// ConfigEndpointSubject is the subject the NATS configuration endpoint
// serves: recall.api.config.<tenant>.<op> (events.ConfigOpGet, …).
const ConfigEndpointSubject = events.SubjectAPIRoot + "." + events.VerbConfig + ".*.*"

// configTimeout bounds one configuration request over NATS.
const configTimeout = 10 * time.Second

// configProblem maps an error of tenantcfg to its problem.
func configProblem(err error) *events.Problem {
	var ie *tenantcfg.InvalidError
	switch {
	case errors.As(err, &ie):
		p := newProblem(ProblemInvalidConfig, http.StatusUnprocessableEntity, fmt.Sprintf("%d invalid field(s); see errors", len(ie.Errors)))
		p.FieldErrors = ie.Errors
		return p
	case errors.Is(err, store.ErrConflict):
		return newProblem(ProblemRevisionMismatch, http.StatusPreconditionFailed, err.Error()+"; read it again and retry")
	case errors.Is(err, context.DeadlineExceeded):
		return newProblem(ProblemTimeout, http.StatusGatewayTimeout, err.Error())
	}
	return newProblem(ProblemUnavailable, http.StatusServiceUnavailable, err.Error())
}

// configOps serves the configuration operations of HTTP and NATS alike.
// History reads on bulk, a connection of its own (its pages can be large),
// so they cannot get the connection that publishes events disconnected;
// writes are checked against lim.
type configOps struct {
	js, bulk jetstream.JetStream
	lim      tenantcfg.Ceilings
}

func (o configOps) kv(ctx context.Context) (jetstream.KeyValue, *events.Problem) {
	return openConfig(ctx, o.js)
}

func openConfig(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, *events.Problem) {
	kv, err := js.KeyValue(ctx, events.BucketConfig)
	if err != nil {
		return nil, configProblem(fmt.Errorf("opening %s: %w", events.BucketConfig, err))
	}
	return kv, nil
}

// get reads tenant's configuration.
func (o configOps) get(ctx context.Context, tenant string) (events.ConfigReply, *events.Problem) {
	kv, p := o.kv(ctx)
	if p != nil {
		return events.ConfigReply{}, p
	}
	e, err := tenantcfg.Read(ctx, kv, tenant)
	if err != nil {
		return events.ConfigReply{}, configProblem(err)
	}
	return events.ConfigReply{Tenant: tenant, Revision: e.Revision, Config: e.Config, Meta: e.Meta}, nil
}

// write replaces (op put) or merge-patches (op patch) tenant's
// configuration with doc under pre.
func (o configOps) write(ctx context.Context, tenant, op string, doc []byte, meta events.ConfigMeta, pre tenantcfg.Precondition) (events.ConfigReply, *events.Problem) {
	kv, p := o.kv(ctx)
	if p != nil {
		return events.ConfigReply{}, p
	}
	meta.At = time.Now().UTC()
	var e tenantcfg.Entry
	var err error
	if op == events.ConfigOpPatch {
		e, err = o.lim.Patch(ctx, kv, tenant, doc, meta, pre)
	} else if e.Config, err = o.lim.Parse(doc); err == nil {
		e.Revision, err = o.lim.Write(ctx, kv, tenant, e.Config, meta, pre)
	}
	if err != nil {
		return events.ConfigReply{}, configProblem(err)
	}
	return events.ConfigReply{Tenant: tenant, Revision: e.Revision, Config: e.Config, Meta: &meta}, nil
}

// history lists a page of tenant's kept revisions (tenantcfg.History:
// bounded in revisions and bytes), read on the bulk connection.
func (o configOps) history(ctx context.Context, tenant string, req events.ConfigHistoryRequest) (events.ConfigHistory, *events.Problem) {
	kv, p := openConfig(ctx, o.bulk)
	if p != nil {
		return events.ConfigHistory{}, p
	}
	h, next, err := tenantcfg.History(ctx, kv, tenant, tenantcfg.Page{Before: req.Before, Limit: req.Limit})
	if err != nil {
		return events.ConfigHistory{}, configProblem(err)
	}
	return events.ConfigHistory{Tenant: tenant, Revisions: h, Next: next}, nil
}

// configEndpoint is the NATS configuration endpoint: the tenant comes from
// the subject (NATS permissions let a tenant user request its own only),
// the actor is that tenant. It answers later, admitted per tenant in the
// HTTP edge's lanes (reads: get; calls: history pages, put and patch), so a
// tenant's requests over NATS and HTTP share one bound. Errors are micro
// errors whose code is the HTTP status (400, 412, 422, 429, 503, 504) with
// an events.Problem as data; large history pages are chunked.
func configEndpoint(ops configOps, adm *Admission) microapi.Endpoint {
	return microapi.Endpoint{Verb: events.VerbConfig, Subject: ConfigEndpointSubject, Usage: "<get|put|patch|history>",
		Mode: microapi.AnswerLater,
		Lane: func(r microapi.Request) *microapi.Admission {
			if r.Session == events.ConfigOpGet {
				return adm.lane(reads)
			}
			return adm.lane(calls)
		},
		Check: checkConfig,
		Handle: func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
			res, p := ops.serve(ctx, r)
			return res, configError(p)
		},
	}
}

// checkConfig refuses a malformed configuration request at once and keeps
// its decoded body in r.Value.
func checkConfig(_ context.Context, r *microapi.Request) *microapi.Error {
	switch r.Session {
	case events.ConfigOpGet:
	case events.ConfigOpHistory:
		var h events.ConfigHistoryRequest
		if aerr := microapi.DecodeBody(r.Data, &h); aerr != nil {
			return configError(newProblem(ProblemInvalidBody, http.StatusBadRequest, aerr.Msg))
		}
		r.Value = h
	case events.ConfigOpPut, events.ConfigOpPatch:
		var w events.ConfigWrite
		if aerr := microapi.DecodeBody(r.Data, &w); aerr != nil || len(w.Config) == 0 {
			return configError(newProblem(ProblemInvalidBody, http.StatusBadRequest,
				`the body must be {"config": {…}, "if_revision": N, "if_none": false}`))
		}
		r.Value = w
	default:
		return configError(newProblem(ProblemInvalidBody, http.StatusBadRequest,
			fmt.Sprintf("unknown operation %q (get, put, patch, history)", r.Session)))
	}
	return nil
}

// serve runs a configuration request over NATS checked by checkConfig,
// within configTimeout.
func (o configOps) serve(ctx context.Context, r microapi.Request) (any, *events.Problem) {
	ctx, cancel := context.WithTimeout(ctx, configTimeout)
	defer cancel()
	switch r.Session {
	case events.ConfigOpGet:
		return o.get(ctx, r.Tenant)
	case events.ConfigOpHistory:
		return o.history(ctx, r.Tenant, r.Value.(events.ConfigHistoryRequest))
	}
	w := r.Value.(events.ConfigWrite)
	meta := events.ConfigMeta{Actor: events.ConfigActorTenant, Via: "nats"}
	return o.write(ctx, r.Tenant, r.Session, w.Config, meta, tenantcfg.Precondition{Revision: w.IfRevision, None: w.IfNone})
}

// configError is the micro error of p (nil for nil).
func configError(p *events.Problem) *microapi.Error {
	if p == nil {
		return nil
	}
	return &microapi.Error{Code: p.Status, Msg: p.Detail, Problem: p}
}
