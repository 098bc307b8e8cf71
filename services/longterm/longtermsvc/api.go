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
	"github.com/recallhq/recall/internal/replyspace"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
)

// ServiceName is the long-term memory service's micro service.
const ServiceName = "recall-longterm"

// readTimeout bounds a read of a user's memory.
const readTimeout = 10 * time.Second

// serve adds the micro service: commit (answered later through the
// returned Later: it runs model calls) and ltm (a read, answered at once).
// Both work under ctx, the service's run context, with the caller's trace:
// a commit in flight when ctx ends is cancelled and answered before the
// connection drains (the caller stops the service, then the Later).
func (c *committer) serve(ctx context.Context, nc *nats.Conn, log *slog.Logger) (micro.Service, *microapi.Later, error) {
	later := microapi.NewLater(ctx, nc, log, 0)
	svc, err := micro.AddService(nc, micro.Config{Name: ServiceName, Version: "1.0.0",
		Description:  "Recall long-term memory: commits of session batches, per-user and per-peer memory",
		StatsHandler: later.Stats})
	if err != nil {
		return nil, nil, err
	}
	read := micro.HandlerFunc(func(req micro.Request) {
		tenant, user, ok := events.SplitSessionSubject(req.Subject())
		if !ok {
			_ = req.Error("400", "subject must be "+events.APISubject(events.VerbLTM, "<tenant>", "<user>"), nil)
			return
		}
		rctx, cancel := context.WithTimeout(natsce.Extract(ctx, nats.Header(req.Headers())), readTimeout)
		defer cancel()
		res, aerr := c.read(rctx, tenant, user, req.Data())
		microapi.Answer(nc, log, req.Reply(), res, aerr, req)
	})
	commit := micro.HandlerFunc(func(req micro.Request) {
		tenant, session, ok := events.SplitSessionSubject(req.Subject())
		if !ok {
			_ = req.Error("400", "subject must be "+events.APISubject(events.VerbCommit, "<tenant>", "<session>"), nil)
			return
		}
		var none events.CommitRequest
		if aerr := microapi.DecodeBody(req.Data(), &none); aerr != nil {
			microapi.Answer(nc, log, req.Reply(), nil, aerr, req)
			return
		}
		later.Go(req, events.VerbCommit, nil, tenant, func(ctx context.Context) (any, *microapi.Error) {
			return c.explicit(ctx, tenant, session)
		})
	})
	for verb, h := range map[string]micro.Handler{events.VerbLTM: read, events.VerbCommit: commit} {
		if err := svc.AddEndpoint(verb, replyspace.Guard(log, h), micro.WithEndpointSubject(events.APISubject(verb, "*", "*"))); err != nil {
			_ = svc.Stop()
			return nil, nil, err
		}
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
