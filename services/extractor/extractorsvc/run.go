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
// published as extraction.failed and parked in RECALL_PARKED (ListParked,
// ReplayParked). docs/extraction.md explains the concurrency design.
//
// Shutdown, when the context given to Run is done: the workers stop
// fetching, in-flight extractions finish for up to DrainTimeout, partitions
// are unpinned and the membership key deleted (others take over at once),
// the memory endpoint stops, then the connection drains. A clean stop
// returns nil.
package extractorsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/ops"
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
	nc, js, err := provision.Open(ctx, cfg.NATS, cfg.Config, "recall-extractor-"+cfg.WorkerID, log)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer nc.Close()
	w, err := NewWorker(nc, cfg, provider, log)
	if err != nil {
		return err
	}
	var kv jetstream.KeyValue
	err = provision.Retry(ctx, log, "opening "+events.BucketMemory, func(ctx context.Context) (err error) {
		kv, err = js.KeyValue(ctx, events.BucketMemory)
		return err
	})
	if err != nil {
		return nil // ctx is done: stopped while starting
	}
	svc, err := serveMemoryAPI(nc, kv, log)
	if err != nil {
		return fmt.Errorf("starting the memory endpoint: %w", err)
	}

	var running atomic.Bool // false once stopping
	running.Store(true)
	opsDone := make(chan error, 1)
	octx, ocancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ocancel()
	go func() {
		opsDone <- ops.Serve(octx, cfg.OpsAddr, ops.Handler(func() error {
			if !nc.IsConnected() {
				return errors.New("NATS is not connected")
			}
			if !running.Load() {
				return errors.New("not serving")
			}
			return w.Ready()
		}), log)
	}()
	log.InfoContext(ctx, "extractor started", "worker", w.ID(), "provider", provider.Name(), "model", provider.Model(),
		"partitions", cfg.Partitions, "concurrency", cfg.Concurrency)
	runErr := w.Run(ctx)
	if ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
		runErr = nil // stopped while joining: a clean stop
	}
	running.Store(false)
	_ = svc.Stop()
	ocancel()
	if err := <-opsDone; err != nil {
		log.Warn("operational endpoints", "err", err)
	}
	if err := nc.Drain(); err != nil {
		log.Warn("draining NATS connection", "err", err)
	}
	for deadline := time.Now().Add(30 * time.Second); !nc.IsClosed() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return runErr
}
