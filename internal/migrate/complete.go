package migrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/provision"
)

// ErrIncomplete is returned when the shards do not hold every legacy
// record of a session exactly once. It cannot happen unless something else
// wrote to a shard's private input subject during the copy; the legacy
// stream is left unsealed, and the services keep refusing to start.
var ErrIncomplete = errors.New("the shards do not hold every legacy record exactly once")

// checkComplete compares the migrated records with the legacy stream:
// when the counts differ it finds which records are missing or copied
// twice (records whose subject is not a session's are never copied).
func (m *Migrator) checkComplete(ctx context.Context, p *positions) error {
	s, err := m.js.Stream(ctx, provision.StreamLegacyTranscript)
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", provision.StreamLegacyTranscript, err)
	}
	if uint64(p.migrated) == s.CachedInfo().State.Msgs {
		return nil
	}
	seen := map[uint64]int{}
	for k := range m.layout.Shards() {
		_, err := m.eachHeader(ctx, m.layout.Streams()[k], func(_ uint64, _ string, h nats.Header) {
			if v, err := strconv.ParseUint(h.Get(HeaderMigratedFrom), 10, 64); err == nil {
				seen[v]++
			}
		})
		if err != nil {
			return err
		}
	}
	var missing, twice []uint64
	_, err = m.eachHeader(ctx, provision.StreamLegacyTranscript, func(seq uint64, subject string, _ nats.Header) {
		if _, _, _, ok := legacySession(subject); ok && seen[seq] != 1 {
			if seen[seq] == 0 {
				missing = append(missing, seq)
			} else {
				twice = append(twice, seq)
			}
		}
	})
	if err != nil {
		return err
	}
	if len(missing)+len(twice) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d missing (first %v), %d copied more than once (first %v); did something publish on recall.migrating.>? The legacy stream is intact: delete the shard streams and run the migration again",
		ErrIncomplete, len(missing), missing[:min(len(missing), 5)], len(twice), twice[:min(len(twice), 5)])
}
