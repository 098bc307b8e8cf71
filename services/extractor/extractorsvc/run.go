// Package extractorsvc is Recall's extractor service: workers that turn
// extraction requests into updated session memory documents, one extraction
// at a time per session across all workers, scaling out across sessions.
//
// Every worker is a member of a partitioned consumer group (internal/pcgroup)
// on RECALL_EXTRACT. Per request it reads the memory and its revision, acks
// covered requests without an LLM call, marks the session running in
// RECALL_STATUS, runs the forked edit (internal/extraction) on the
// transcript, commits with a compare-and-set on the revision it read, acks,
// and publishes extraction.completed. Requests that fail permanently are
// published as extraction.failed and parked in RECALL_PARKED (internal/parked:
// List, Replay). docs/extraction.md explains the concurrency design.
//
// Shutdown, when the context given to Run is done: the workers stop
// fetching, in-flight extractions finish for up to DrainTimeout, partitions
// are unpinned and the membership key deleted (others take over at once);
// the rest follows the one order of docs/architecture.md#shutdown. A clean
// stop returns nil.
package extractorsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// Run serves until ctx is done. It uses cfg.Provider when set, else the
// provider llm.New builds from cfg.LLMConfig. Several Runs with distinct
// WorkerIDs may share a process (benchmarks).
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	cfg = cfg.withDefaults()
	provider := cfg.Provider
	if provider == nil {
		p, err := llm.New(cfg.LLMConfig, log)
		if err != nil {
			return err
		}
		provider = p
	}
	life, err := lifecycle.Start(ctx, lifecycle.Config{Name: "recall-extractor-" + cfg.WorkerID, NATS: cfg.NATS, Provision: cfg.Config, OpsAddr: cfg.OpsAddr}, log)
	if errors.Is(err, lifecycle.ErrStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	defer life.Stop()
	w, err := NewWorker(life.NC, cfg, provider, log)
	if err != nil {
		return err
	}
	var kv jetstream.KeyValue
	err = provision.Startup.Do(ctx, log, "opening "+events.BucketMemory, func(ctx context.Context) (err error) {
		kv, err = life.JS.KeyValue(ctx, events.BucketMemory)
		return err
	})
	if err != nil {
		return nil // ctx is done: stopped while starting
	}
	later := microapi.NewLater(ctx, life.NC, log, 0)
	svc, err := serveMemoryAPI(later, kv)
	if err != nil {
		return fmt.Errorf("starting the memory endpoint: %w", err)
	}
	life.Adopt(svc)
	life.Await(later)
	if err := w.ServeSharing(svc); err != nil {
		return fmt.Errorf("serving work sharing: %w", err)
	}
	life.SetReady(w.Ready)
	log.InfoContext(ctx, "extractor started", "worker", w.ID(), "provider", provider.Name(), "model", provider.Model(),
		"partitions", cfg.Partitions, "concurrency", cfg.Concurrency)
	runErr := w.Run(ctx)
	if ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
		runErr = nil // stopped while joining: a clean stop
	}
	return runErr
}
