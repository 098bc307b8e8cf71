package migrate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// The migration's state is kept in the legacy stream's metadata, so it
// lives and dies with the stream: the target S, the stream's original
// subjects while it is frozen, and "done" once it is sealed.
const (
	metaShards   = "recall.migrate.shards"
	metaState    = "recall.migrate.state"
	metaSubjects = "recall.migrate.subjects"
	metaDoneAt   = "recall.migrate.done_at"
)

// frozenSubject is the legacy stream's only subject while it is migrated:
// nobody publishes there, so a writer of the old version gets an error.
const frozenSubject = "recall.migrating.legacy"

// inputSubjects is shard k's subject while it is migrated: the copy
// publishes there, the stream stores on events.ShardSubject (a subject
// transform), and writers of the new version, who publish on the final
// subject, get an error until the shard is finished.
func inputSubjects(k int) string { return "recall.migrating." + strconv.Itoa(k) + ".*.*" }

// inputTransform maps inputSubjects(k) to shard k's final subjects.
func inputTransform(k int) *jetstream.SubjectTransformConfig {
	return &jetstream.SubjectTransformConfig{Source: inputSubjects(k),
		Destination: events.SubjectTranscriptRoot + "." + strconv.Itoa(k) + ".{{wildcard(1)}}.{{wildcard(2)}}"}
}

// inspect reads the legacy stream and decides whether there is work:
// done is true when there is no legacy stream or it was migrated already
// (m.rep says which). It refuses a target S that differs from the shards
// that exist or from a migration under way.
func (m *Migrator) inspect(ctx context.Context) (done bool, err error) {
	info, err := provision.LegacyTranscript(ctx, m.js)
	if err != nil {
		return false, err
	}
	if info == nil {
		m.rep.Outcome = OutcomeNoLegacy
		return true, nil
	}
	m.legacy, m.rep.LegacyRecords = info, info.State.Msgs
	md := info.Config.Metadata
	if info.Config.Sealed && md[metaState] == stateDone {
		m.rep.Outcome = OutcomeAlready
		m.rep.Shards, _ = strconv.Atoi(md[metaShards])
		m.rep.CompletedAt, _ = time.Parse(time.RFC3339, md[metaDoneAt])
		return true, nil
	}
	if info.Config.Sealed && !m.cfg.Force {
		return false, fmt.Errorf("the legacy stream %s was sealed, but not by recall migrate, and the services may have run on the shards since: rerun with --force to copy its records anyway", provision.StreamLegacyTranscript)
	}
	want := strconv.Itoa(m.layout.Shards())
	if s := md[metaShards]; s != "" && s != want {
		return false, fmt.Errorf("a migration to %s shards is under way, this one asks for %s: %w; rerun with --shards %s", s, want, ErrShardCount, s)
	}
	have, err := provision.ShardCount(ctx, m.js)
	if err != nil {
		return false, err
	}
	if have != 0 && have != m.layout.Shards() {
		return false, fmt.Errorf("the shard streams exist with %d shards, this migration asks for %s: %w; rerun with --shards %d", have, want, ErrShardCount, have)
	}
	return false, nil
}

// freeze moves the legacy stream's subjects to frozenSubject and records
// the migration in its metadata; a frozen or sealed stream is left alone.
func (m *Migrator) freeze(ctx context.Context) error {
	cfg := m.legacy.Config
	if cfg.Sealed || cfg.Metadata[metaState] == stateFrozen {
		return nil
	}
	md := maps.Clone(cfg.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	md[metaShards], md[metaState] = strconv.Itoa(m.layout.Shards()), stateFrozen
	md[metaSubjects] = strings.Join(cfg.Subjects, " ")
	cfg.Metadata, cfg.Subjects = md, []string{frozenSubject}
	s, err := m.js.UpdateStream(ctx, cfg)
	if err != nil {
		return fmt.Errorf("freezing stream %s: %w", cfg.Name, err)
	}
	m.legacy = s.CachedInfo()
	m.log.Info("froze the legacy stream: writers of the old version get an error from now on",
		"stream", cfg.Name, "records", m.legacy.State.Msgs, "shards", m.layout.Shards())
	return m.at("frozen", 0)
}

// createShards creates the shard streams with their input transform (see
// inputSubjects), or checks the existing ones, and learns where to publish
// each shard's copies.
func (m *Migrator) createShards(ctx context.Context) error {
	want := provision.TranscriptStreams(m.cfg.Provision)
	m.inPrefix = make([]string, len(want))
	for k, sc := range want {
		in := sc
		in.Subjects, in.SubjectTransform = []string{inputSubjects(k)}, inputTransform(k)
		s, err := m.js.CreateStream(ctx, in)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			s, err = m.js.Stream(ctx, sc.Name)
		}
		if err != nil {
			return fmt.Errorf("creating stream %s: %w", sc.Name, err)
		}
		have := s.CachedInfo().Config
		if have.Metadata[events.ShardsMetadataKey] != sc.Metadata[events.ShardsMetadataKey] {
			return fmt.Errorf("stream %s exists for %s shards, this migration asks for %d: %w", sc.Name, have.Metadata[events.ShardsMetadataKey], m.layout.Shards(), ErrShardCount)
		}
		m.inPrefix[k] = events.SubjectTranscriptRoot + "." + strconv.Itoa(k) + "."
		if have.SubjectTransform != nil && have.SubjectTransform.Source == inputSubjects(k) {
			m.inPrefix[k] = "recall.migrating." + strconv.Itoa(k) + "."
		}
	}
	return nil
}

// finish gives every shard stream its final subjects, then seals the
// legacy stream with its original subjects (so a writer of the old version
// is told the stream is sealed) and marks the migration done.
func (m *Migrator) finish(ctx context.Context) error {
	m.rep.PerShard = make([]uint64, m.layout.Shards())
	for k, sc := range provision.TranscriptStreams(m.cfg.Provision) {
		s, err := m.js.Stream(ctx, sc.Name)
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", sc.Name, err)
		}
		info := s.CachedInfo()
		m.rep.PerShard[k] = info.State.Msgs
		if info.Config.SubjectTransform == nil {
			continue
		}
		cfg := info.Config
		cfg.Subjects, cfg.SubjectTransform = sc.Subjects, nil
		if _, err := m.js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("giving stream %s its subjects: %w", sc.Name, err)
		}
		if err := m.at("finish", int64(k)); err != nil {
			return err
		}
	}
	return m.seal(ctx)
}

// seal seals the legacy stream and records the migration as done.
func (m *Migrator) seal(ctx context.Context) error {
	s, err := m.js.Stream(ctx, provision.StreamLegacyTranscript)
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
	}
	cfg := s.CachedInfo().Config
	md := maps.Clone(cfg.Metadata)
	if md == nil {
		md = map[string]string{}
	}
	if subjects := md[metaSubjects]; subjects != "" {
		cfg.Subjects = strings.Fields(subjects)
	}
	now := time.Now().UTC().Truncate(time.Second)
	md[metaShards], md[metaState], md[metaDoneAt] = strconv.Itoa(m.layout.Shards()), stateDone, now.Format(time.RFC3339)
	cfg.Metadata, cfg.Sealed = md, true
	if _, err := m.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("sealing stream %s: %w", cfg.Name, err)
	}
	m.rep.CompletedAt = now
	m.log.Info("sealed the legacy stream; delete it once you no longer need it", "stream", cfg.Name, "command", "nats stream rm "+cfg.Name)
	return nil
}

// LegacyStreamConfig is the legacy stream as provision created it before
// shards, for tests and tools that build a legacy deployment.
func LegacyStreamConfig(c provision.Config) jetstream.StreamConfig {
	sc := provision.TranscriptStreams(c)[0]
	sc.Name, sc.Description = provision.StreamLegacyTranscript, "Recall session transcripts (CloudEvents, binary mode)"
	sc.Subjects, sc.Metadata = []string{events.SubjectTranscriptRoot + ".*.*"}, nil
	return sc
}
