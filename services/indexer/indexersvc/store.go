package indexersvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/keylock"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// entries is the session index bucket. A session's entry is under
// events.MemoryKey(tenant, session) (two tokens); a name claim under
// nameKey(tenant, slug) (three tokens) holds the session id, so names are
// unique within a tenant by KV create; a lease under leaseKey(tenant,
// session) makes indexings of a session one at a time across replicas.
type entries struct {
	kv  jetstream.KeyValue
	log *slog.Logger
}

func nameKey(tenant, slug string) string { return "names." + tenant + "." + slug }

func leaseKey(tenant, session string) string { return "leases." + tenant + "." + session }

// lease takes the session's indexing lease across replicas.
func (s *entries) lease(ctx context.Context, tenant, session, holder string, ttl time.Duration) (release func(), err error) {
	return keylock.Lease(ctx, s.kv, leaseKey(tenant, session), holder, ttl)
}

// errNotFound means a session has no index entry.
var errNotFound = errors.New("no index entry")

// get returns a session's entry and revision. A value that does not decode
// is reported as a warning and treated as missing, with its revision, so
// the next success overwrites it.
func (s *entries) get(ctx context.Context, tenant, session string) (events.SessionIndex, uint64, error) {
	e, err := s.kv.Get(ctx, events.MemoryKey(tenant, session))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return events.SessionIndex{Tenant: tenant, Session: session}, 0, errNotFound
	}
	if err != nil {
		return events.SessionIndex{}, 0, fmt.Errorf("reading the index entry of %s: %w", session, err)
	}
	var idx events.SessionIndex
	if err := json.Unmarshal(e.Value(), &idx); err != nil || idx.Session != session || idx.Tenant != tenant {
		s.log.Warn("index entry does not decode; treated as missing until the next indexing rewrites it",
			"tenant", tenant, "session", session, "revision", e.Revision(), "err", err)
		return events.SessionIndex{Tenant: tenant, Session: session}, e.Revision(), errNotFound
	}
	return idx, e.Revision(), nil
}

// put stores idx with compare-and-set on rev (0: must not exist).
func (s *entries) put(ctx context.Context, idx events.SessionIndex, rev uint64) (uint64, error) {
	b, err := json.Marshal(idx)
	if err != nil {
		return 0, err
	}
	key := events.MemoryKey(idx.Tenant, idx.Session)
	if rev == 0 {
		return s.kv.Create(ctx, key, b)
	}
	return s.kv.Update(ctx, key, b, rev)
}

// update applies fn to the session's entry with compare-and-set, retrying
// on conflict; fn returns false to write nothing.
func (s *entries) update(ctx context.Context, tenant, session string, fn func(*events.SessionIndex) bool) (events.SessionIndex, uint64, error) {
	for attempt := 0; ; attempt++ {
		idx, rev, err := s.get(ctx, tenant, session)
		if err != nil && !errors.Is(err, errNotFound) {
			return idx, 0, err
		}
		if !fn(&idx) {
			return idx, rev, nil
		}
		nrev, err := s.put(ctx, idx, rev)
		if err == nil {
			return idx, nrev, nil
		}
		if !isConflict(err) || attempt >= 20 {
			return idx, 0, fmt.Errorf("writing the index entry of %s: %w", session, err)
		}
	}
}

func isConflict(err error) bool { return keylock.IsConflict(err) }

// claimName claims a name for session from memory.NameVariants(slug,
// session) — the slug, then the slug with a short and a long digest of
// the session id — and returns the one it got; a variant the session
// already holds is kept. It costs at most two KV operations per variant
// (a create, and a read of the holder when taken), so at most six however
// many sessions share the slug. A variant taken by another session is
// skipped; all taken is an error (a long digest collision: practically
// never).
func (s *entries) claimName(ctx context.Context, tenant, session, slug string) (string, error) {
	for _, name := range memory.NameVariants(slug, session) {
		_, err := s.kv.Create(ctx, nameKey(tenant, name), []byte(session))
		if err == nil {
			return name, nil
		}
		if !isConflict(err) {
			return "", fmt.Errorf("claiming the name %s: %w", name, err)
		}
		holder, err := s.kv.Get(ctx, nameKey(tenant, name))
		if err == nil && string(holder.Value()) == session {
			return name, nil
		}
	}
	return "", fmt.Errorf("claiming a name for %s: every variant of %q is taken", session, slug)
}

// releaseName drops session's claim of name (if it still holds it).
func (s *entries) releaseName(ctx context.Context, tenant, session, name string) {
	if name == "" {
		return
	}
	e, err := s.kv.Get(ctx, nameKey(tenant, name))
	if err != nil || string(e.Value()) != session {
		return
	}
	_ = s.kv.Delete(ctx, nameKey(tenant, name), jetstream.LastRevision(e.Revision()))
}

// byName returns the session holding name in tenant ("" when none).
func (s *entries) byName(ctx context.Context, tenant, slug string) (string, error) {
	if slug == "" {
		return "", nil
	}
	e, err := s.kv.Get(ctx, nameKey(tenant, slug))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// list returns every decodable entry of tenant.
func (s *entries) list(ctx context.Context, tenant string) ([]events.SessionIndex, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, tenant+".*")
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	out := make([]events.SessionIndex, 0, len(keys))
	for _, k := range keys {
		_, session, ok := cutKey(k)
		if !ok {
			continue
		}
		idx, _, err := s.get(ctx, tenant, session)
		if errors.Is(err, errNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, idx)
	}
	return out, nil
}

func cutKey(k string) (tenant, session string, ok bool) {
	for i := 0; i < len(k); i++ {
		if k[i] == '.' {
			return k[:i], k[i+1:], true
		}
	}
	return "", "", false
}
