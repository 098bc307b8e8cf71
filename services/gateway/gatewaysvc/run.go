// Package gatewaysvc is Recall's model gateway: an HTTP service that speaks
// the model providers' own wire formats, so an agent (Claude Code, Codex,
// an SDK) needs only a base URL to get Recall:
//
//	/anthropic/v1/*  → RECALL_GATEWAY_ANTHROPIC_URL/v1/*   (ANTHROPIC_BASE_URL=http://host:8090/anthropic)
//	/openai/v1/*     → RECALL_GATEWAY_OPENAI_URL/v1/*      (OPENAI_BASE_URL=http://host:8090/openai/v1)
//
// Pass-through: the client's headers — its provider key among them — go to
// the upstream untouched (the gateway never stores, logs, traces or
// publishes them); Recall's own headers (x-recall-token, x-recall-session)
// do not. Responses, errors included, reach the client with their status
// and headers as the upstream sent them, copied as they arrive and flushed
// after every write, so a stream is never buffered. An upstream that cannot
// be reached is answered 502 in the provider's error shape.
//
// With RECALL_TENANTS a request needs a Recall token in x-recall-token; one
// without a valid token is answered 401 in the provider's error shape and
// not forwarded. Admission bounds the requests in flight per tenant and in
// all, in a lane for small bodies and one for large ones (so twenty 20 MB
// bodies cannot take the memory of the process): over the tenant's share a
// request is answered 429, over the lane's 503, both with Retry-After.
//
// With NATS, the gateway also captures each completed exchange into the
// session's transcript (capture.go: off the client's path, through
// pkg/client) and answers compactions — the client's summarization turn,
// the APIs' compaction contracts, and transparent compaction over a
// tenant's threshold — from the session's memory (compact.go); see
// docs/gateway.md.
//
// Fail open: the gateway serves from the moment it listens, before NATS is
// reachable, and forwards unchanged whenever Recall cannot help (not
// connected, an error or RECALL_GATEWAY_RECALL_TIMEOUT passed), counting it
// (Stats.FailOpen, recall_gateway_fail_open_total) and logging it.
//
// Shutdown, when the context given to Run is done: the listener closes,
// requests in flight (streams) finish within RECALL_GATEWAY_SHUTDOWN_GRACE,
// then the Recall side stops (internal/lifecycle: captures queued are
// published, then the connection drains). A clean stop returns nil.
package gatewaysvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/recallhq/recall/internal/lifecycle"
)

// ServiceName is the gateway's connection and log name.
const ServiceName = "recall-gateway"

// Run serves the gateway at cfg.Addr until ctx is done.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg = cfg.withDefaults()
	log.InfoContext(ctx, "starting the model gateway", "config", cfg) // secrets masked (LogValue)
	g, err := New(cfg, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listening for the gateway on %s (RECALL_GATEWAY_ADDR): %w", cfg.Addr, err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.InfoContext(ctx, "serving the model gateway", "addr", ln.Addr().String(), "anthropic", cfg.AnthropicURL, "openai", cfg.OpenAIURL)
	started := make(chan startResult, 1)
	go func() { started <- g.start(ctx) }()
	var res startResult
	select {
	case <-ctx.Done():
	case res = <-started:
		if res.err == nil {
			select {
			case <-ctx.Done():
			case err = <-served:
			}
		}
	case err = <-served:
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		_ = srv.Close()
	}
	if res.life == nil && res.err == nil {
		res = <-started // ctx is done: Start returns promptly
	}
	if res.life != nil {
		g.detach(sctx)
		res.life.Stop()
	}
	switch {
	case res.err != nil:
		return res.err
	case err != nil && !errors.Is(err, http.ErrServerClosed):
		return fmt.Errorf("serving the gateway: %w", err)
	}
	return nil
}

type startResult struct {
	life *lifecycle.Service
	err  error
}

// start connects to Recall (retrying until ctx ends, while the gateway
// already forwards) and attaches the connection.
func (g *Gateway) start(ctx context.Context) startResult {
	life, err := lifecycle.Start(ctx, lifecycle.Config{Name: ServiceName, NATS: g.cfg.NATS, Provision: g.cfg.Config, OpsAddr: g.cfg.OpsAddr}, g.log)
	if errors.Is(err, lifecycle.ErrStopped) {
		return startResult{}
	}
	if err != nil {
		return startResult{err: err}
	}
	g.Attach(ctx, life.NC, life.JS)
	if err := g.AttachConfig(ctx, life.JS); err != nil { // compact.go
		g.log.WarnContext(ctx, "compacting with every tenant's default gateway configuration", "err", err)
	}
	life.SetReady(func() error { return nil })
	g.log.InfoContext(ctx, "connected to Recall: capturing and compacting")
	return startResult{life: life}
}
