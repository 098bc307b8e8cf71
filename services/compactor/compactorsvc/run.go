// Package compactorsvc is Recall's compactor service: it answers compaction
// requests on recall.api.compact.<tenant>.<session> (a nats micro service
// named recall-compactor) from the session memory the extractors keep
// current, without calling an LLM on that path.
//
// Each request is handled in its own goroutine (at most
// Config.TenantConcurrency at once for one tenant — more are refused with a
// 429 error — and Config.Concurrency in all — a 503), so a request waiting for a
// running extraction never delays another session's compaction. Replies
// larger than the server's max payload are sent with pkg/chunked.
//
// Shutdown, when the context given to Run is done, follows the one order
// of docs/architecture.md#shutdown; the compactor's own part: in-flight
// compactions are answered within 10 s (what still runs then — a full
// compaction waiting on its model — is cancelled and answered as not
// served). A clean stop returns nil.
package compactorsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	jsoniter "github.com/json-iterator/go"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
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
	// The watcher outlives ctx: in-flight compactions are answered after
	// ctx ends (for at most inflightGrace; then they are cancelled).
	watch, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	life.OnStop(stopWatch)
	tenants, err := tenantcfg.Watch(watch, life.JS, log)
	if err != nil {
		return err
	}
	c, err := New(ctx, life.NC, life.JS, cfg, tenants, provider, log)
	if err != nil {
		return err
	}
	h := &handler{c: c, log: log, adm: microapi.NewAdmission(cfg.TenantConcurrency, cfg.Concurrency, time.Second),
		later: microapi.NewLater(ctx, life.NC, log, inflightGrace)}
	svc, err := h.service()
	if err != nil {
		return err
	}
	life.Adopt(svc)
	life.Await(h.later)
	life.SetReady(func() error { return nil })
	log.InfoContext(ctx, "serving compactions", "subject", events.APISubject(events.VerbCompact, "*", "*"), "full_compact", provider != nil)
	<-ctx.Done()
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

// service registers the micro service from its endpoint table: compact
// and edit, both checked at once (a malformed request is a 400 through
// micro) and answered later under h.adm (429 when the tenant has its
// share in flight, 503 when the replica is full, both with Retry-After)
// through h.later, which sends the result as a (chunked when large) JSON
// reply; a panic answers 500.
func (h *handler) service() (micro.Service, error) {
	return microapi.Serve(h.later, microapi.Service{Name: ServiceName, Description: "Recall compaction from session memory",
		Endpoints: []microapi.Endpoint{
			{Verb: events.VerbCompact, Mode: microapi.AnswerLater, Admission: h.adm, Check: checkCompact, Handle: h.compact},
			{Verb: events.VerbEdit, Mode: microapi.AnswerLater, Admission: h.adm, Check: checkEdit, Handle: h.edit},
		}})
}

// handler adapts micro requests to the Compactor, one goroutine per
// request (microapi.Later).
type handler struct {
	c   *Compactor
	log *slog.Logger
	// adm bounds the requests in flight per tenant and in all.
	adm   *microapi.Admission
	later *microapi.Later
}

// checkCompact decodes a compaction request into r.Value.
func checkCompact(_ context.Context, r *microapi.Request) *microapi.Error {
	c, err := events.DecodeCompactRequest(r.Data)
	if err != nil {
		return microapi.Fail(400, "%v", err)
	}
	r.Value = c
	return nil
}

// compact answers a compaction; the announcement follows the answer.
func (h *handler) compact(ctx context.Context, r microapi.Request) (any, *microapi.Error) {
	req := r.Value.(events.CompactRequest)
	reply := h.c.Compact(ctx, r.Tenant, r.Session, req)
	data, aerr := encode(reply)
	if aerr != nil || req.Preview {
		return data, aerr
	}
	return microapi.Then{Reply: data, After: func() { h.c.Announce(ctx, r.Tenant, r.Session, reply) }}, nil
}

// encode encodes a reply with replyJSON.
func encode(reply any) (microapi.JSON, *microapi.Error) {
	data, err := replyJSON.Marshal(reply)
	if err != nil {
		return nil, microapi.Fail(500, "encoding the reply: %v", err)
	}
	return data, nil
}
