// Package provision creates Recall's streams and KV buckets, idempotently and
// safely when many replicas start at once.
//
// Every service calls Ensure at start. Creating what exists with the same
// configuration is a no-op; a compatible difference (max age, dedup window,
// history, replicas) is applied with an update; an incompatible one (another
// partition count, another retention or storage) fails with ErrIncompatible
// and a message that says what to do. Nothing is ever deleted.
package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/envconf"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// ErrIncompatible is wrapped by errors about existing streams or buckets whose
// configuration cannot be changed in place.
var ErrIncompatible = errors.New("incompatible existing configuration")

// Config sizes the streams and buckets (environment variables RECALL_*).
type Config struct {
	Replicas         int           `envconfig:"REPLICAS" default:"1" desc:"replicas of every stream and bucket (1 or 3 on a cluster)"`
	Partitions       int           `envconfig:"PARTITIONS" default:"16" desc:"extraction partitions; fixed once the stream exists"`
	Shards           int           `envconfig:"SHARDS" default:"4" desc:"transcript shards, one stream each (docs/operations.md, \"Shards\"); fixed once the streams exist, changed with recall migrate"`
	MemoryStorage    bool          `envconfig:"MEMORY_STORAGE" default:"false" desc:"keep streams in memory instead of files (tests, benchmarks)"`
	TranscriptMaxAge time.Duration `envconfig:"TRANSCRIPT_MAX_AGE" default:"720h" desc:"how long transcripts are kept"`
	EventsMaxAge     time.Duration `envconfig:"EVENTS_MAX_AGE" default:"24h" desc:"how long lifecycle notifications are kept"`
	DedupWindow      time.Duration `envconfig:"DEDUP_WINDOW" default:"5m" desc:"duplicate detection window for event ids (>= your retry horizon)"`
	MemoryHistory    int           `envconfig:"MEMORY_HISTORY" default:"16" desc:"revisions of each session memory kept (max 64)"`
	BalanceEvery     time.Duration `envconfig:"BALANCE_EVERY" default:"1m" negative:"ok" desc:"how often the ingest service spreads the leaders of the transcript's shard streams and of their durable consumers over the NATS nodes, on a cluster (docs/operations.md, \"Leaders spread across nodes\"); negative: only when a service starts"`
}

// PartitionsMetadataKey records the partition count on RECALL_EXTRACT.
const PartitionsMetadataKey = "recall.partitions"

func (c Config) withDefaults() Config {
	envconf.Defaults(&c)
	c.Shards = min(c.Shards, events.MaxShards)
	c.MemoryHistory = min(c.MemoryHistory, 64)
	return c
}

// Layout is the transcript's shard layout these settings create.
func (c Config) Layout() events.Layout { return events.NewLayout(c.withDefaults().Shards) }

func (c Config) storage() jetstream.StorageType {
	if c.MemoryStorage {
		return jetstream.MemoryStorage
	}
	return jetstream.FileStorage
}

// Streams returns the stream configurations Ensure creates.
func Streams(c Config) []jetstream.StreamConfig {
	c = c.withDefaults()
	return append(TranscriptStreams(c), []jetstream.StreamConfig{
		{
			Name:        events.StreamExtract,
			Description: "Recall extraction requests, partitioned by session",
			Subjects:    []string{events.SubjectExtractRoot + ".*.*"},
			SubjectTransform: &jetstream.SubjectTransformConfig{
				Source:      events.SubjectExtractRoot + ".*.*",
				Destination: PartitionDestination(c.Partitions),
			},
			Retention:  jetstream.WorkQueuePolicy,
			Storage:    c.storage(),
			Replicas:   c.Replicas,
			Duplicates: c.DedupWindow,
			Discard:    jetstream.DiscardOld,
			Metadata:   map[string]string{PartitionsMetadataKey: strconv.Itoa(c.Partitions)},
		},
		{
			Name:        events.StreamCommits,
			Description: "Recall long-term memory commit requests, partitioned by user",
			Subjects:    []string{events.SubjectCommitRoot + ".*.*"},
			SubjectTransform: &jetstream.SubjectTransformConfig{
				Source:      events.SubjectCommitRoot + ".*.*",
				Destination: partitioned(events.SubjectCommitPartitioned, c.Partitions),
			},
			Retention:  jetstream.WorkQueuePolicy,
			Storage:    c.storage(),
			Replicas:   c.Replicas,
			Duplicates: c.DedupWindow,
			Discard:    jetstream.DiscardOld,
			Metadata:   map[string]string{PartitionsMetadataKey: strconv.Itoa(c.Partitions)},
		},
		{
			Name:        events.StreamEvents,
			Description: "Recall lifecycle notifications for platforms",
			Subjects:    []string{events.SubjectEventsRoot + ".>"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     c.storage(),
			Replicas:    c.Replicas,
			MaxAge:      c.EventsMaxAge,
			Duplicates:  c.DedupWindow,
			AllowDirect: true,
		},
	}...)
}

// TranscriptStreams returns the configurations of the transcript's shard
// streams, RECALL_TRANSCRIPT_0 … RECALL_TRANSCRIPT_<S-1>, each recording S
// and its own number in its metadata.
func TranscriptStreams(c Config) []jetstream.StreamConfig {
	c = c.withDefaults()
	out := make([]jetstream.StreamConfig, c.Shards)
	for k := range out {
		out[k] = jetstream.StreamConfig{
			Name:        events.TranscriptShardStream(k),
			Description: fmt.Sprintf("Recall session transcripts, shard %d of %d (CloudEvents, binary mode)", k, c.Shards),
			Subjects:    []string{events.ShardSubjects(k)},
			Retention:   jetstream.LimitsPolicy,
			Storage:     c.storage(),
			Replicas:    c.Replicas,
			MaxAge:      c.TranscriptMaxAge,
			Duplicates:  c.DedupWindow,
			AllowDirect: true,
			Discard:     jetstream.DiscardOld,
			Metadata:    map[string]string{events.ShardsMetadataKey: strconv.Itoa(c.Shards), events.ShardMetadataKey: strconv.Itoa(k)},
		}
	}
	return out
}

// PartitionDestination is the subject transform destination of RECALL_EXTRACT:
// recall.extractp.<partition(n, tenant, session)>.<tenant>.<session>.
func PartitionDestination(n int) string { return partitioned(events.SubjectExtractPartitioned, n) }

// partitioned is a subject transform destination that prefixes
// <root>.<tenant>.<key> with the partition of its two tokens among n.
func partitioned(root string, n int) string {
	return root + ".{{partition(" + strconv.Itoa(n) + ",1,2)}}.{{wildcard(1)}}.{{wildcard(2)}}"
}

// Buckets returns the KV bucket configurations Ensure creates.
func Buckets(c Config) []jetstream.KeyValueConfig {
	c = c.withDefaults()
	return []jetstream.KeyValueConfig{
		{Bucket: events.BucketMemory, Description: "session memory documents", History: uint8(c.MemoryHistory), Storage: c.storage(), Replicas: c.Replicas},
		// Per-key TTLs need LimitMarkerTTL (server 2.11+).
		{Bucket: events.BucketStatus, Description: "running extractions", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		{Bucket: events.BucketConfig, Description: "per-tenant configuration (the last 64 revisions: GET /v1/config/history)", History: 64, Storage: c.storage(), Replicas: c.Replicas},
		{Bucket: events.BucketWorkers, Description: "extractor membership heartbeats", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		{Bucket: events.BucketParked, Description: "failed extraction requests awaiting replay", History: 1, Storage: c.storage(), Replicas: c.Replicas},
		{Bucket: events.BucketTriggers, Description: "trigger membership heartbeats", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		// A snapshot is of no use once its record aged out of the transcript.
		{Bucket: events.BucketTriggerState, Description: "trigger state snapshots of long sessions", History: 1, Storage: c.storage(), Replicas: c.Replicas, TTL: c.TranscriptMaxAge},
		{Bucket: events.BucketGateway, Description: "what the model gateway stored of each session (block fingerprints)", History: 1, Storage: c.storage(), Replicas: c.Replicas, TTL: c.TranscriptMaxAge},
		{Bucket: events.BucketLTM, Description: "long-term memory documents per user and peer", History: 16, Storage: c.storage(), Replicas: c.Replicas},
		{Bucket: events.BucketLTMMembers, Description: "long-term memory replica membership heartbeats", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		{Bucket: events.BucketIndexMembers, Description: "indexer replicas sharing the transcript's shards (membership heartbeats)", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		{Bucket: events.BucketLTMFollowers, Description: "long-term memory replicas sharing the transcript's shards (membership heartbeats)", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		{Bucket: events.BucketLTMState, Description: "long-term memory commit records and leases", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		{Bucket: events.BucketIndex, Description: "session index: names, summaries, tags (and name claims, indexing leases)", History: 8, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
		// Erased sessions: each tombstone expires with its own TTL (RECALL_ERASE_TOMBSTONE_TTL).
		{Bucket: events.BucketTombstones, Description: "tombstones of erased sessions (per-key TTL)", History: 1, Storage: c.storage(), Replicas: c.Replicas, LimitMarkerTTL: time.Second},
	}
}

// Ensure creates or reconciles every stream and bucket. It is safe to call
// concurrently from many processes. Each stream and bucket gets its own
// AttemptTimeout (within ctx), so one hung request fails the attempt in
// seconds; EnsureRetry tries again.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) error {
	// Bounded like every request below: one sent while the meta leader is
	// going away is never answered, and would hold the attempt for 30 s.
	lctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	err := checkLayout(lctx, js, c)
	cancel()
	if err != nil {
		return err
	}
	for _, sc := range Streams(c) {
		cctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		err := ensureStream(cctx, js, sc)
		cancel()
		if err != nil {
			return err
		}
	}
	for _, kc := range Buckets(c) {
		cctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		err := ensureBucket(cctx, js, kc)
		cancel()
		if err != nil {
			return err
		}
	}
	for _, oc := range ObjectStores(c) {
		cctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		err := ensureObjectStore(cctx, js, oc)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// ObjectStores returns the Object Store bucket configurations Ensure
// creates: the claim-check bodies, kept as long as the transcript records
// that reference them.
func ObjectStores(c Config) []jetstream.ObjectStoreConfig {
	c = c.withDefaults()
	return []jetstream.ObjectStoreConfig{
		{Bucket: events.BucketBlobs, Description: "bodies of transcript events too large for one record (claim check)",
			TTL: c.TranscriptMaxAge, Storage: c.storage(), Replicas: c.Replicas},
	}
}

// ensureObjectStore creates an Object Store bucket or updates its max age
// and replicas.
func ensureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig) error {
	_, err := js.CreateObjectStore(ctx, want)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrBucketExists) && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("creating object store %s: %w", want.Bucket, err)
	}
	s, err := js.Stream(ctx, "OBJ_"+want.Bucket)
	if err != nil {
		return fmt.Errorf("reading object store %s: %w", want.Bucket, err)
	}
	have := s.CachedInfo().Config
	if have.Storage != want.Storage {
		return fmt.Errorf("object store %s uses %s storage but the configuration says %s (RECALL_MEMORY_STORAGE): %w; set it back, or back up and delete it (nats object rm %s)",
			want.Bucket, have.Storage, want.Storage, ErrIncompatible, want.Bucket)
	}
	if have.MaxAge == want.TTL && have.Replicas == want.Replicas {
		return nil
	}
	if _, err := js.UpdateObjectStore(ctx, want); err != nil {
		return fmt.Errorf("updating object store %s: %w", want.Bucket, err)
	}
	return nil
}

// recreated bounds ensureStream's retries of a stream deleted between its
// create and its read: at once, three times.
var recreated = retry.Policy{Attempts: 4}

// ensureStream creates the stream want, or checks the one that exists and
// updates what can change in place (ErrIncompatible for what cannot).
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	return recreated.Do(ctx, nil, "", func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, want)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return retry.Permanent(fmt.Errorf("creating stream %s: %w", want.Name, err))
		}
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("reading stream %s: %w", want.Name, err) // deleted between the two calls; try again
		}
		if err != nil {
			return retry.Permanent(fmt.Errorf("reading stream %s: %w", want.Name, err))
		}
		return retry.Permanent(updateStream(ctx, js, s.CachedInfo().Config, want))
	})
}

// updateStream checks the existing stream's configuration have against
// want and updates what can change in place.
func updateStream(ctx context.Context, js jetstream.JetStream, have, want jetstream.StreamConfig) error {
	if err := compatible(have, want); err != nil {
		return err
	}
	if !needsUpdate(have, want) {
		return nil
	}
	upd := have
	upd.MaxAge, upd.Duplicates, upd.Replicas, upd.AllowDirect = want.MaxAge, want.Duplicates, want.Replicas, want.AllowDirect
	upd.Description = want.Description
	if _, err := js.UpdateStream(ctx, upd); err != nil {
		return fmt.Errorf("updating stream %s: %w", want.Name, err)
	}
	return nil
}

func compatible(have, want jetstream.StreamConfig) error {
	if have.Retention != want.Retention {
		return fmt.Errorf("stream %s has retention %s, Recall needs %s: %w; back it up and delete it (nats stream rm %s), then restart",
			want.Name, have.Retention, want.Retention, ErrIncompatible, want.Name)
	}
	if have.Storage != want.Storage {
		return fmt.Errorf("stream %s uses %s storage but the configuration says %s (RECALL_MEMORY_STORAGE): %w; set it back, or back up and delete the stream",
			want.Name, have.Storage, want.Storage, ErrIncompatible)
	}
	if want.SubjectTransform != nil {
		hp := have.Metadata[PartitionsMetadataKey]
		wp := want.Metadata[PartitionsMetadataKey]
		if hp != wp || have.SubjectTransform == nil || have.SubjectTransform.Destination != want.SubjectTransform.Destination {
			return fmt.Errorf("stream %s has %s partitions, the configuration says %s: %w; set RECALL_PARTITIONS=%s, or change the count as docs/operations.md describes (stop the trigger, let extractors drain the stream, nats stream rm %s, restart with the new count)",
				want.Name, orUnknown(hp), wp, ErrIncompatible, orUnknown(hp), want.Name)
		}
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown number of"
	}
	return s
}

func needsUpdate(have, want jetstream.StreamConfig) bool {
	return have.MaxAge != want.MaxAge || have.Duplicates != want.Duplicates || have.Replicas != want.Replicas ||
		have.AllowDirect != want.AllowDirect || have.Description != want.Description
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) error {
	_, err := js.CreateKeyValue(ctx, want)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrBucketExists) && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("creating bucket %s: %w", want.Bucket, err)
	}
	kv, err := js.KeyValue(ctx, want.Bucket)
	if err != nil {
		return fmt.Errorf("reading bucket %s: %w", want.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("reading bucket %s: %w", want.Bucket, err)
	}
	replicas := want.Replicas
	if info, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		cfg := info.StreamInfo().Config
		replicas = cfg.Replicas
		if want.LimitMarkerTTL > 0 && !cfg.AllowMsgTTL {
			return fmt.Errorf("bucket %s exists without per-key TTLs: %w; delete it (nats kv rm %s) and restart", want.Bucket, ErrIncompatible, want.Bucket)
		}
	}
	if int(st.History()) != int(want.History) || replicas != want.Replicas {
		if _, err := js.UpdateKeyValue(ctx, want); err != nil {
			return fmt.Errorf("updating bucket %s: %w", want.Bucket, err)
		}
	}
	return nil
}

// EnsureRetry calls Ensure until it succeeds, so a service may start before
// NATS is reachable, while a node is down or returning, or while another
// replica is provisioning. It gives up at once on ErrIncompatible (retrying
// cannot help), and returns ctx.Err() when ctx is done first. Each stream
// and bucket call is bounded to AttemptTimeout and the whole attempt to 30 s;
// failures are logged and retried with Startup's backoff.
func EnsureRetry(ctx context.Context, js jetstream.JetStream, c Config, log *slog.Logger) error {
	p := Startup
	p.Attempt = 30 * time.Second
	return p.Do(ctx, log, "provisioning", func(ctx context.Context) error {
		err := Ensure(ctx, js, c)
		if errors.Is(err, ErrIncompatible) {
			return retry.Permanent(err)
		}
		return err
	})
}

// Names returns the stream names of every stream and bucket Ensure creates
// (a KV bucket B is stream KV_B, an Object Store bucket O is OBJ_O).
func Names(c Config) []string {
	var names []string
	for _, sc := range Streams(c) {
		names = append(names, sc.Name)
	}
	for _, kc := range Buckets(c) {
		names = append(names, "KV_"+kc.Bucket)
	}
	for _, oc := range ObjectStores(c) {
		names = append(names, "OBJ_"+oc.Bucket)
	}
	return names
}

// WaitAvailable returns once every stream and bucket answers an info
// request (each has a leader), retrying with Startup until ctx is done. A
// service that starts while a node is down or returning thus waits here,
// in seconds, for the elections instead of failing its first read.
func WaitAvailable(ctx context.Context, js jetstream.JetStream, c Config, log *slog.Logger) error {
	for _, name := range Names(c) {
		err := Startup.Do(ctx, log, "opening "+name, func(ctx context.Context) error {
			_, err := js.Stream(ctx, name)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Open is how every service starts: connect to NATS as name, open
// JetStream (with opts), provision with EnsureRetry and wait until every
// stream and bucket has a leader (WaitAvailable), then spread the shard
// streams' and their durable consumers' leaders over the nodes
// (BalanceLeaders, best effort, logged). It retries until ctx is done, so
// a degraded cluster delays a start but never fails it. On error the
// connection is closed; when ctx ended first the error is ctx.Err(). The
// caller owns the returned connection.
func Open(ctx context.Context, nc natsconn.Config, c Config, name string, log *slog.Logger, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	conn, err := natsconn.ConnectLogged(nc, name, log)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(conn, opts...)
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("opening JetStream: %w", err)
	}
	if err := EnsureRetry(ctx, js, c, log); err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("provisioning: %w", err)
	}
	if err := WaitAvailable(ctx, js, c, log); err != nil {
		conn.Close()
		return nil, nil, err
	}
	balanceOnStart(ctx, js, c, log) // spread the leaders (leaders.go); never fails
	return conn, js, nil
}
