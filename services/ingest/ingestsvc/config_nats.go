package ingestsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
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
	case errors.Is(err, tenantcfg.ErrRevisionMismatch):
		return newProblem(ProblemRevisionMismatch, http.StatusPreconditionFailed, err.Error()+"; read it again and retry")
	case errors.Is(err, context.DeadlineExceeded):
		return newProblem(ProblemTimeout, http.StatusGatewayTimeout, err.Error())
	}
	return newProblem(ProblemUnavailable, http.StatusServiceUnavailable, err.Error())
}

// configOps serves the configuration operations of HTTP and NATS alike.
type configOps struct {
	js jetstream.JetStream
}

func (o configOps) kv(ctx context.Context) (jetstream.KeyValue, *events.Problem) {
	kv, err := o.js.KeyValue(ctx, events.BucketConfig)
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
		e, err = tenantcfg.Patch(ctx, kv, tenant, doc, meta, pre)
	} else if e.Config, err = tenantcfg.Parse(doc); err == nil {
		e.Revision, err = tenantcfg.Write(ctx, kv, tenant, e.Config, meta, pre)
	}
	if err != nil {
		return events.ConfigReply{}, configProblem(err)
	}
	return events.ConfigReply{Tenant: tenant, Revision: e.Revision, Config: e.Config, Meta: &meta}, nil
}

// history lists tenant's kept revisions.
func (o configOps) history(ctx context.Context, tenant string) (events.ConfigHistory, *events.Problem) {
	kv, p := o.kv(ctx)
	if p != nil {
		return events.ConfigHistory{}, p
	}
	h, err := tenantcfg.History(ctx, kv, tenant)
	if err != nil {
		return events.ConfigHistory{}, configProblem(err)
	}
	return events.ConfigHistory{Tenant: tenant, Revisions: h}, nil
}

// configHandler serves the NATS configuration endpoint: the tenant comes
// from the subject (NATS permissions let a tenant user request its own
// only), the actor is that tenant. Errors are micro errors whose code is
// the HTTP status (400, 412, 422, 503, 504) with a events.Problem as data.
func configHandler(js jetstream.JetStream, log *slog.Logger) micro.HandlerFunc {
	ops := configOps{js: js}
	return func(req micro.Request) {
		tenant, op, ok := events.SplitSessionSubject(req.Subject())
		if !ok {
			answerConfig(req, log, nil, newProblem(ProblemInvalidBody, http.StatusBadRequest,
				"subject must be "+events.SubjectAPIRoot+"."+events.VerbConfig+".<tenant>.<get|put|patch|history>"))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), configTimeout)
		defer cancel()
		switch op {
		case events.ConfigOpGet:
			res, p := ops.get(ctx, tenant)
			answerConfig(req, log, res, p)
		case events.ConfigOpHistory:
			res, p := ops.history(ctx, tenant)
			answerConfig(req, log, res, p)
		case events.ConfigOpPut, events.ConfigOpPatch:
			var w events.ConfigWrite
			if aerr := microapi.DecodeBody(req.Data(), &w); aerr != nil || len(w.Config) == 0 {
				answerConfig(req, log, nil, newProblem(ProblemInvalidBody, http.StatusBadRequest,
					`the body must be {"config": {…}, "if_revision": N, "if_none": false}`))
				return
			}
			meta := events.ConfigMeta{Actor: events.ConfigActorTenant, Via: "nats"}
			res, p := ops.write(ctx, tenant, op, w.Config, meta, tenantcfg.Precondition{Revision: w.IfRevision, None: w.IfNone})
			answerConfig(req, log, res, p)
		default:
			answerConfig(req, log, nil, newProblem(ProblemInvalidBody, http.StatusBadRequest,
				fmt.Sprintf("unknown operation %q (get, put, patch, history)", op)))
		}
	}
}

func answerConfig(req micro.Request, log *slog.Logger, res any, p *events.Problem) {
	var aerr *microapi.Error
	if p != nil {
		aerr = &microapi.Error{Code: p.Status, Msg: p.Detail, Problem: p}
	}
	if aerr == nil {
		b, _ := json.Marshal(res)
		_ = req.Respond(b, micro.WithHeaders(micro.Headers{"Content-Type": []string{"application/json"}}))
		return
	}
	microapi.Answer(nil, log, req.Reply(), nil, aerr, req)
}
