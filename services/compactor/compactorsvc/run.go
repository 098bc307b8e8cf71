// Package compactorsvc is Recall's compactor service: it answers compaction
// requests on recall.api.compact.<tenant>.<session> (a nats micro service
// named recall-compactor) from the session memory the extractors keep
// current, without calling an LLM on that path.
//
// Each request is handled in its own goroutine (at most
// Config.TenantConcurrency at once for one tenant — more are refused with a
// 429 error — and Config.Concurrency in all — a 503), so a request waiting for a
// running extraction never delays another session's compaction. Replies
// larger than the server's max payload are sent with internal/chunked.
//
// Shutdown, when the context given to Run is done: the micro service stops
// taking requests, in-flight compactions finish and are answered (after 10 s
// what still runs — a full compaction waiting on its model — is cancelled
// and answered as not served), then internal/lifecycle stops the
// operational endpoints and drains the connection. A clean stop returns nil.
package compactorsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	jsoniter "github.com/json-iterator/go"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/replyspace"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// ServiceName is the micro service name.
const ServiceName = "recall-compactor"

// replyJSON encodes replies. The kept events are CloudEvents whose
// MarshalJSON output encoding/json would re-validate and re-compact one by
// one; json-iterator writes it as is, which halves the encoding of a reply of
// tens of messages. The bytes are standard JSON either way.
var replyJSON = jsoniter.ConfigCompatibleWithStandardLibrary

// inflightGrace bounds the wait for in-flight compactions at shutdown; what
// is still running then (a full compaction waiting on its model) is
// cancelled and answered with an error.
var inflightGrace = 10 * time.Second

// Run serves until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg = cfg.withDefaults()
	life, err := lifecycle.Start(ctx, lifecycle.Config{Name: ServiceName, NATS: cfg.NATS, Provision: cfg.Config, OpsAddr: cfg.OpsAddr}, log)
	if errors.Is(err, lifecycle.ErrStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	defer life.Stop()
	provider, err := fullCompactProvider(cfg, log)
	if err != nil {
		return err
	}
	// The watcher and the requests outlive ctx: in-flight compactions are
	// answered after ctx ends (bounded by inflightGrace).
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	tenants, err := tenantcfg.Watch(base, life.JS, log)
	if err != nil {
		return err
	}
	c, err := New(ctx, life.NC, life.JS, cfg, tenants, provider, log)
	if err != nil {
		return err
	}
	h := &handler{c: c, nc: life.NC, log: log, adm: microapi.NewAdmission(cfg.TenantConcurrency, cfg.Concurrency, time.Second), base: base, later: microapi.NewLater()}
	svc, err := h.service()
	if err != nil {
		return err
	}
	life.SetReady(func() error { return nil })
	log.InfoContext(ctx, "serving compactions", "subject", events.APISubject(events.VerbCompact, "*", "*"), "full_compact", provider != nil)
	<-ctx.Done()
	if err := svc.Stop(); err != nil {
		log.Warn("stopping micro service", "err", err)
	}
	h.finish(cancelBase)
	return nil
}

// fullCompactProvider is the LLM provider of full compactions, nil when they
// are off.
func fullCompactProvider(cfg Config, log *slog.Logger) (llm.Provider, error) {
	if !cfg.FullCompact {
		return nil, nil
	}
	if cfg.Provider != nil {
		return cfg.Provider, nil
	}
	p, err := llm.New(cfg.LLMConfig, log)
	if err != nil {
		return nil, fmt.Errorf("full compaction (RECALL_FULL_COMPACT=false disables it): %w", err)
	}
	return p, nil
}

// service registers the micro service with the compact and edit endpoints.
func (h *handler) service() (micro.Service, error) {
	svc, err := micro.AddService(h.nc, micro.Config{
		Name:        ServiceName,
		Version:     "1.0.0",
		Description: "Recall compaction from session memory",
		// Compactions are answered from goroutines: their outcomes are
		// counted by h.later and shown as each endpoint's stats data.
		StatsHandler: h.later.Stats,
	})
	if err != nil {
		return nil, fmt.Errorf("adding micro service: %w", err)
	}
	for verb, serve := range map[string]micro.HandlerFunc{events.VerbCompact: h.serve, events.VerbEdit: h.serveEdit} {
		g := svc.AddGroup(events.SubjectAPIRoot + "." + verb)
		if err := g.AddEndpoint(verb, replyspace.Guard(h.log, serve), micro.WithEndpointSubject("*.*")); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("adding %s endpoint: %w", verb, err)
		}
	}
	return svc, nil
}

// finish waits for the in-flight requests, at most inflightGrace, then
// cancels what still runs and waits for it to answer.
func (h *handler) finish(cancel context.CancelFunc) {
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(inflightGrace):
	}
	h.log.Warn("cancelling compactions still running at shutdown", "grace", inflightGrace)
	cancel()
	<-done
}

// fail answers reply with a micro service error.
func (h *handler) fail(reply, code, description string) {
	if reply == "" {
		return
	}
	_ = h.nc.PublishMsg(&nats.Msg{Subject: reply, Header: nats.Header{
		micro.ErrorCodeHeader: []string{code},
		micro.ErrorHeader:     []string{description},
	}})
}

// handler adapts micro requests to the Compactor, one goroutine per request.
type handler struct {
	c   *Compactor
	nc  *nats.Conn
	log *slog.Logger
	// adm bounds the requests in flight per tenant and in all.
	adm *microapi.Admission
	wg  sync.WaitGroup
	// later counts the answers sent after the handler returned.
	later *microapi.Later
	base  context.Context
}

func (h *handler) serve(req micro.Request) {
	tenant, session, ok := events.SplitSessionSubject(req.Subject())
	if !ok {
		_ = req.Error("400", "subject must be recall.api.compact.<tenant>.<session> with valid ids", nil)
		return
	}
	r, err := events.DecodeCompactRequest(req.Data())
	if err != nil {
		_ = req.Error("400", err.Error(), nil)
		return
	}
	h.answer(req, events.VerbCompact, "compaction", tenant, session, func(ctx context.Context) (any, func(), error) {
		reply := h.c.Compact(ctx, tenant, session, r)
		if r.Preview {
			return reply, nil, nil
		}
		return reply, func() { h.c.Announce(ctx, tenant, session, reply) }, nil
	})
}

// answer runs work on its own goroutine under the admission bounds (429
// when the tenant has its share in flight, 503 when the replica is full,
// both with Retry-After) and sends its result as a (chunked when large) JSON
// reply; a work error or a panic answers 500. then, when work returns one,
// runs after the reply is sent. The request's headers and reply subject are
// read before answer returns: micro reuses the request once the handler
// returns, so the goroutine answers on the connection directly, and the
// outcome is counted in h.later under the endpoint verb.
func (h *handler) answer(req micro.Request, verb, what, tenant, session string, work func(context.Context) (any, func(), error)) {
	release, aerr := h.adm.Admit(tenant)
	if aerr != nil {
		microapi.Answer(h.nc, h.log, req.Reply(), nil, aerr, req)
		return
	}
	h.wg.Add(1)
	hdrs, replyTo := nats.Header(req.Headers()), req.Reply()
	done := h.later.Begin(verb)
	// The stats count an answer, and the tenant's slot is freed, before it
	// goes out: a client that has the answer finds it counted and may send
	// its next request at once.
	fail := func(description string) {
		done(500, description)
		release()
		h.fail(replyTo, "500", description)
	}
	go func() {
		defer h.wg.Done()
		defer release() // a panic before the answer (release is idempotent)
		ctx := natsce.Extract(h.base, hdrs)
		defer func() {
			if v := recover(); v != nil {
				h.log.ErrorContext(ctx, what+" panicked", "tenant", tenant, "session", session, "panic", v, "stack", string(debug.Stack()))
				fail("internal error (" + what + "); see the compactor's log")
			}
		}()
		reply, then, err := work(ctx)
		if err != nil {
			fail(err.Error())
			return
		}
		data, err := replyJSON.Marshal(reply)
		if err != nil {
			fail("encoding the reply: " + err.Error())
			return
		}
		hdr := nats.Header{"Content-Type": []string{"application/json"}}
		done(0, "")
		release()
		if err := chunked.Respond(h.nc, replyTo, hdr, data); err != nil {
			h.log.WarnContext(ctx, "sending the "+what+" reply", "tenant", tenant, "session", session, "err", err)
		}
		if then != nil {
			then()
		}
	}()
}
