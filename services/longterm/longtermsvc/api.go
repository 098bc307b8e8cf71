package longtermsvc

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// ServiceName is the long-term memory service's micro service.
const ServiceName = "recall-longterm"

// The bounds of explicit commits waiting at once on one replica: each
// waits for a commit that may call a model.
const (
	commitsPerTenant = 16
	commitsInAll     = 256
)

// readTimeout bounds a read of a user's memory.
const readTimeout = 10 * time.Second

// serve adds the micro service from its endpoint table (internal/
// microapi): commit (answered later through the returned Later: it runs
// model calls) and ltm (one KV read within readTimeout, answered later
// under the read admission, so one tenant's flood is refused with 429
// instead of queueing the others' reads). Both work under ctx, the service's run context, with the
// caller's trace: a commit in flight when ctx ends is cancelled and
// answered before the connection drains (the caller stops the service,
// then the Later).
func (c *committer) serve(ctx context.Context, nc *nats.Conn, log *slog.Logger) (micro.Service, *microapi.Later, error) {
	later := microapi.NewLater(ctx, nc, log, 0)
	svc, err := microapi.Serve(later, microapi.Service{Name: ServiceName,
		Description: "Recall long-term memory: commits of session batches, per-user and per-peer memory",
		Endpoints: []microapi.Endpoint{
			{Verb: events.VerbLTM, Usage: "<user>", Mode: microapi.AnswerLater, Admission: microapi.NewReadAdmission(),
				Handle: microapi.WithTimeout(readTimeout, func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
					return c.read(ctx, r.Tenant, r.Session, r.Data)
				})},
			{Verb: events.VerbCommit, Mode: microapi.AnswerLater,
				Admission: microapi.NewAdmission(commitsPerTenant, commitsInAll, time.Second),
				Check: func(_ context.Context, r *microapi.Request) *microapi.Error {
					var none events.CommitRequest
					return microapi.DecodeBody(r.Data, &none)
				},
				Handle: func(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
					return c.explicit(ctx, r.Tenant, r.Session)
				}},
		}})
	if err != nil {
		return nil, nil, err
	}
	return svc, later, nil
}

// explicit runs a commit asked for through the API.
func (c *committer) explicit(ctx context.Context, tenant, session string) (any, *microapi.Error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CommitWait+c.cfg.Timeout)
	defer cancel()
	out, err := c.commit(ctx, commitJob{tenant: tenant, session: session, reason: events.CommitReasonExplicit})
	switch {
	case errors.Is(err, errFailed) && out != nil:
		// Announced; the outcome says why, and the batch waits for the
		// next commit.
		return out, nil
	case errors.Is(err, errNoUser):
		return nil, microapi.Fail(422, "session %s: %v", session, err)
	case errors.Is(err, errNothingNew):
		return nil, microapi.Fail(422, "session %s: %v", session, err)
	case errors.Is(err, errPolicy):
		return nil, microapi.Fail(400, "session %s: %v", session, err)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, microapi.Fail(504, "the commit of %s did not finish in time (a running commit of the same user may still be going)", session)
	case errors.Is(err, context.Canceled):
		return nil, &microapi.Error{Code: 503, Msg: "the service is stopping; retry the commit of " + session, RetryAfter: time.Second}
	case err != nil:
		return nil, microapi.Fail(503, "%v", err)
	}
	return out, nil
}

// read answers a user's memory, filtered by type.
func (c *committer) read(ctx context.Context, tenant, user string, body []byte) (any, *microapi.Error) {
	var req events.LTMRequest
	if aerr := microapi.DecodeBody(body, &req); aerr != nil {
		return nil, aerr
	}
	reg, err := c.registry(tenant)
	if err != nil {
		return nil, microapi.Fail(500, "%v", err)
	}
	for _, t := range req.Types {
		if _, ok := reg.Get(t); !ok {
			return nil, microapi.Fail(400, "unknown memory type %q (known: %v)", t, reg.Names())
		}
	}
	docs, err := listDocs(ctx, c.ltm, tenant, user)
	if err != nil {
		return nil, microapi.Fail(503, "%v", err)
	}
	if len(req.Types) > 0 {
		docs = slices.DeleteFunc(docs, func(d events.LTMDocument) bool { return !slices.Contains(req.Types, d.Type) })
	}
	if docs == nil {
		docs = []events.LTMDocument{}
	}
	return events.LTMReply{User: user, Documents: docs, Context: contextBlock(user, docs)}, nil
}

// registry is the tenant's memory type registry.
func (c *committer) registry(tenant string) (*memory.Registry, error) {
	return memory.NewRegistry(c.tenants.Get(tenant).CustomMemoryTypes)
}
