package stack

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/migrate"
	"github.com/recallhq/recall/internal/provision"
)

// migrateLegacy migrates a legacy transcript on the embedded server before
// the stack provisions: nothing else runs on it, so the check that the
// services are stopped is skipped. An external server is left to `recall
// migrate` (provisioning fails and says so).
func (s *Stack) migrateLegacy(ctx context.Context, nc *nats.Conn, pc provision.Config) error {
	if s.srv == nil {
		return nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("opening JetStream: %w", err)
	}
	legacy, err := provision.LegacyTranscript(ctx, js)
	if err != nil || legacy == nil || legacy.Config.Sealed {
		return err
	}
	s.log.Info("the data directory holds a transcript from before shards: migrating it", "records", legacy.State.Msgs, "shards", pc.Layout().Shards())
	bulk, err := nats.Connect(s.NATSURL, s.AdminOptions()...)
	if err != nil {
		return fmt.Errorf("connecting to NATS at %s: %w", s.NATSURL, err)
	}
	defer bulk.Close()
	m, err := migrate.New(nc, bulk, migrate.Config{Provision: pc, Force: true, Log: s.log.With("step", "migrate")})
	if err != nil {
		return err
	}
	r, err := m.Run(ctx)
	if err != nil {
		return fmt.Errorf("migrating the transcript to shards: %w", err)
	}
	s.log.Info("migrated the transcript to shards", "shards", r.Shards, "copied", r.Copied, "duration", r.Duration,
		"legacy", provision.StreamLegacyTranscript+" is sealed; delete it with: nats stream rm "+provision.StreamLegacyTranscript)
	return nil
}
