package extractorsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// Component names the extractor in the events it produces (source
// "/recall/extractor").
const Component = "extractor"

// Outcomes of one request (metric label "outcome").
const (
	OutcomeCompleted = "completed" // the notes were committed
	OutcomeSkipped   = "skipped"   // already covered: no LLM call
	OutcomeConflict  = "conflict"  // the fenced commit lost: result discarded
	OutcomeFailed    = "failed"    // parked
	OutcomeRetry     = "retry"     // infrastructure error: redelivered later
)

// Park reasons (ExtractionFailed.Reason, Parked.Reason).
const (
	ReasonNoValidToolCall = "no_valid_tool_call"
	ReasonProvider        = "provider_unavailable"
	ReasonLLM             = "llm_error"
	ReasonInvalidRequest  = "invalid_request"
	ReasonInfrastructure  = "infrastructure"
)

// Worker is one extractor: a member of the partitioned consumer group on
// RECALL_EXTRACT that runs extractions for the sessions of the partitions it
// owns. Several workers may share one process (tests, benchmarks).
type Worker struct {
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	events   *eventpub.Publisher
	provider llm.Provider
	log      *slog.Logger
	group    *pcgroup.Group
	reader   *transcript.Reader

	memory  jetstream.KeyValue
	status  jetstream.KeyValue
	parked  jetstream.KeyValue
	stream  jetstream.Stream
	tenants *tenantcfg.Store
	known   knownRevs   // last memory revision per session (readFresh)
	opened  atomic.Bool // the buckets and the tenant configuration are open

	// extract is extraction.Run; tests may replace it.
	extract func(context.Context, llm.Provider, extraction.Input) (*extraction.Output, error)
}

// NewWorker returns a worker that uses nc (which it does not close) and p.
// The streams and buckets must exist (provision.Ensure).
func NewWorker(nc *nats.Conn, cfg Config, p llm.Provider, log *slog.Logger) (*Worker, error) {
	if p == nil {
		return nil, errors.New("extractor: no LLM provider")
	}
	cfg = cfg.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("opening JetStream: %w", err)
	}
	w := &Worker{cfg: cfg, nc: nc, js: js, events: eventpub.New(js, Component), provider: p, log: log.With("worker", cfg.WorkerID),
		reader: transcript.NewReader(nc, cfg.Layout()), extract: extraction.Run}
	w.group, err = pcgroup.New(js, pcgroup.Config{
		Stream:        events.StreamExtract,
		Partitions:    cfg.Partitions,
		Filter:        events.ExtractPartitionFilter,
		Durable:       events.ExtractDurable,
		PriorityGroup: events.PriorityGroupExtract,
		Bucket:        events.BucketWorkers,
		Member:        cfg.WorkerID,
		HeartbeatTTL:  cfg.HeartbeatTTL,
		AckWait:       cfg.AckWait,
		PinnedTTL:     cfg.PinnedTTL,
		FetchWait:     cfg.FetchWait,
		DrainTimeout:  cfg.DrainTimeout,
		Concurrency:   cfg.Concurrency,
		// Several sessions of one partition at once, one request of a
		// session at a time and in order.
		KeyOf:    sessionKey,
		InFlight: 2 * cfg.Concurrency, // the next requests are fetched while the slots are busy
		// Requests waiting for a slot are offered to idle workers (the
		// owner keeps the session's order and settles the request).
		Share: shareSubject(cfg),
		Log:   w.log,
	}, w.handle)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// shareSubject is the work-sharing subject ("" when sharing is off).
func shareSubject(cfg Config) string {
	if cfg.ShareOff {
		return ""
	}
	return events.SubjectExtractShare
}

// sessionKey is the session part (<tenant>.<session>) of a partitioned
// request subject recall.extractp.<p>.<tenant>.<session>.
func sessionKey(subject string) string {
	rest := strings.TrimPrefix(subject, events.SubjectExtractPartitioned+".")
	if i := strings.IndexByte(rest, '.'); i >= 0 {
		return rest[i+1:]
	}
	return subject
}

// ServeSharing adds the work-sharing endpoints to svc (the worker's micro
// service): other workers' offers and the results of this worker's. Without
// it (or with ShareOff) the worker runs only its own partitions' requests.
// Call it before Run.
func (w *Worker) ServeSharing(svc micro.Service) error {
	if w.cfg.ShareOff {
		return nil
	}
	return w.group.AddShareEndpoints(svc)
}

// ID is the worker's member id.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// Group is the worker's consumer-group membership (partitions owned, live
// members).
func (w *Worker) Group() *pcgroup.Group { return w.group }

// Run serves until ctx is done, then hands its partitions over (in-flight
// extractions finish for up to DrainTimeout) and returns nil. Opening the
// buckets, the tenant-config watch and joining the group are retried with
// provision.Startup until they succeed or ctx is done, so Run never returns
// because the cluster is degraded; it returns ctx.Err() when stopped before
// it joined.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.open(ctx); err != nil {
		return err
	}
	unregister := registerWorker(w)
	defer unregister()
	// The attempt runs with ctx itself: it lasts as long as the worker
	// serves, and returns early only when it cannot join.
	return provision.Startup.Do(ctx, w.log, "joining the extraction group", func(context.Context) error {
		return w.group.Run(ctx)
	})
}

// open opens the buckets, the stream and the tenant configuration, each
// retried until it succeeds or ctx is done.
func (w *Worker) open(ctx context.Context) error {
	kvs := []struct {
		name string
		dst  *jetstream.KeyValue
	}{{events.BucketMemory, &w.memory}, {events.BucketStatus, &w.status}, {events.BucketParked, &w.parked}}
	for _, b := range kvs {
		err := provision.Startup.Do(ctx, w.log, "opening "+b.name, func(ctx context.Context) (err error) {
			*b.dst, err = w.js.KeyValue(ctx, b.name)
			return err
		})
		if err != nil {
			return err
		}
	}
	err := provision.Startup.Do(ctx, w.log, "opening "+events.StreamExtract, func(ctx context.Context) (err error) {
		w.stream, err = w.js.Stream(ctx, events.StreamExtract)
		return err
	})
	if err != nil {
		return err
	}
	if w.tenants, err = tenantcfg.Watch(ctx, w.js, w.log); err != nil {
		return err
	}
	w.opened.Store(true)
	return nil
}

// Ready reports why the worker is not serving yet (or nil): it is ready
// once its buckets are open and it has joined the group (it sees itself
// among the members, so it consumes the partitions assigned to it).
func (w *Worker) Ready() error {
	if !w.opened.Load() {
		return errors.New("opening buckets and tenant configuration")
	}
	if !slices.Contains(w.group.Members(), w.cfg.WorkerID) {
		return errors.New("joining the extraction group")
	}
	return nil
}
