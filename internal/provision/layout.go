package provision

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// StreamLegacyTranscript is the single transcript stream of deployments
// before shards. Services refuse to start while it holds records that were
// not migrated; `recall migrate` moves them into the shards and seals it.
const StreamLegacyTranscript = "RECALL_TRANSCRIPT"

// ErrNeedsMigration is wrapped (with ErrIncompatible) when the transcript
// is still in the legacy single stream.
var ErrNeedsMigration = errors.New("the transcript needs recall migrate")

// checkLayout fails with ErrIncompatible when the deployment's transcript
// is not where c puts it: a legacy single stream not migrated yet, or
// shard streams created with another shard count.
func checkLayout(ctx context.Context, js jetstream.JetStream, c Config) error {
	c = c.withDefaults()
	legacy, err := LegacyTranscript(ctx, js)
	if err != nil {
		return err
	}
	if legacy != nil && !legacy.Config.Sealed {
		return fmt.Errorf("the transcript is in the single stream %s (%d records), from before shards: %w: %w; run `recall migrate` once (docs/operations.md, \"Shards\"), then start the services",
			StreamLegacyTranscript, legacy.State.Msgs, ErrIncompatible, ErrNeedsMigration)
	}
	have, err := ShardCount(ctx, js)
	if err != nil {
		return err
	}
	if have != 0 && have != c.Shards {
		return fmt.Errorf("the transcript has %d shards, the configuration says %d: %w; set RECALL_SHARDS=%d (the count is fixed once the streams exist)",
			have, c.Shards, ErrIncompatible, have)
	}
	return nil
}

// LegacyTranscript returns the legacy single stream's info, or nil when
// there is none.
func LegacyTranscript(ctx context.Context, js jetstream.JetStream) (*jetstream.StreamInfo, error) {
	s, err := js.Stream(ctx, StreamLegacyTranscript)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", StreamLegacyTranscript, err)
	}
	return s.CachedInfo(), nil
}

// ShardCount is S as recorded on the first shard stream, or 0 when the
// shards do not exist yet.
func ShardCount(ctx context.Context, js jetstream.JetStream) (int, error) {
	s, err := js.Stream(ctx, events.TranscriptShardStream(0))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", events.TranscriptShardStream(0), err)
	}
	n, err := strconv.Atoi(s.CachedInfo().Config.Metadata[events.ShardsMetadataKey])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("stream %s does not record its shard count (metadata %s): %w", events.TranscriptShardStream(0), events.ShardsMetadataKey, ErrIncompatible)
	}
	return n, nil
}

// DiscoverLayout is the deployment's transcript layout, read from the
// server: for clients and tools that do not provision (their RECALL_SHARDS
// may be unset). It fails when the shards do not exist yet.
func DiscoverLayout(ctx context.Context, js jetstream.JetStream) (events.Layout, error) {
	n, err := ShardCount(ctx, js)
	if err != nil {
		return events.Layout{}, err
	}
	if n == 0 {
		return events.Layout{}, fmt.Errorf("no transcript shards (stream %s) on this server: start Recall's services first", events.TranscriptShardStream(0))
	}
	return events.NewLayout(n), nil
}
