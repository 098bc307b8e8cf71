package indexersvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/keylock"
	"github.com/recallhq/recall/internal/store"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/pkg/retry"
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

// stored is a session's entry as the bucket holds it: the
// events.SessionIndex the API serves and, beside it, References — the
// sessions this one referenced with @@, as the <session-references>
// context messages of its transcript name them (noteReferences as they
// arrive; each indexing adds those it read, so an indexing that reads the
// whole transcript re-derives them), in order of first reference, at most
// maxReferences, never itself. The console lists a session's incoming
// references from them (docs/console.md); the API's replies carry the
// SessionIndex alone. Every write goes through modify, which keeps them.
type stored struct {
	events.SessionIndex
	References []string `json:"references,omitempty"`
}

// maxReferences bounds the sessions one entry records as referenced (the
// console lists as many outgoing references).
const maxReferences = 64

// get returns a session's entry and revision; see load.
func (s *entries) get(ctx context.Context, tenant, session string) (events.SessionIndex, uint64, error) {
	e, rev, err := s.load(ctx, tenant, session)
	return e.SessionIndex, rev, err
}

// load returns a session's stored entry and revision. A value that does
// not decode is reported as a warning and treated as missing, with its
// revision, so the next success overwrites it.
func (s *entries) load(ctx context.Context, tenant, session string) (stored, uint64, error) {
	missing := stored{SessionIndex: events.SessionIndex{Tenant: tenant, Session: session}}
	e, err := s.kv.Get(ctx, events.MemoryKey(tenant, session))
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return missing, 0, errNotFound
	}
	if err != nil {
		return stored{}, 0, fmt.Errorf("reading the index entry of %s: %w", session, err)
	}
	var v stored
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.Session != session || v.Tenant != tenant {
		s.log.Warn("index entry does not decode; treated as missing until the next indexing rewrites it",
			"tenant", tenant, "session", session, "revision", e.Revision(), "err", err)
		return missing, e.Revision(), errNotFound
	}
	return v, e.Revision(), nil
}

// put stores v with compare-and-set on rev (0: must not exist); a lost
// race is store.ErrConflict.
func (s *entries) put(ctx context.Context, v stored, rev uint64) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, err
	}
	key := events.MemoryKey(v.Tenant, v.Session)
	var n uint64
	if rev == 0 {
		n, err = s.kv.Create(ctx, key, b)
	} else {
		n, err = s.kv.Update(ctx, key, b, rev)
	}
	return n, store.CAS(err)
}

// update applies fn to the session's entry with compare-and-set, retrying
// on conflict; fn returns false to write nothing. The entry's references
// are kept.
func (s *entries) update(ctx context.Context, tenant, session string, fn func(*events.SessionIndex) bool) (events.SessionIndex, uint64, error) {
	v, rev, err := s.modify(ctx, tenant, session, func(v *stored) bool { return fn(&v.SessionIndex) })
	return v.SessionIndex, rev, err
}

// casRetry is modify's bound on lost races: a conflict is retried at once
// (the next load sees the winner's write), 20 times after the first.
var casRetry = retry.Policy{Attempts: 21}

// modify applies fn to the session's stored entry with compare-and-set,
// retrying on conflict (casRetry); fn returns false to write nothing. A
// load or write error that is not a conflict is returned at once; after
// the last lost race the error wraps store.ErrConflict.
func (s *entries) modify(ctx context.Context, tenant, session string, fn func(*stored) bool) (stored, uint64, error) {
	var v stored
	var nrev uint64
	err := casRetry.Do(ctx, nil, "", func(ctx context.Context) error {
		var rev uint64
		var err error
		v, rev, err = s.load(ctx, tenant, session)
		if err != nil && !errors.Is(err, errNotFound) {
			return retry.Permanent(err)
		}
		if !fn(&v) {
			nrev = rev
			return nil
		}
		if nrev, err = s.put(ctx, v, rev); err != nil {
			err = fmt.Errorf("writing the index entry of %s: %w", session, err)
			if !store.IsConflict(err) {
				return retry.Permanent(err)
			}
		}
		return err
	})
	if err != nil {
		return v, 0, err
	}
	return v, nrev, nil
}

// refer adds refs (session ids) to v's references: each once, never v's
// own session, at most maxReferences in all. It reports whether it added
// any.
func (v *stored) refer(refs []string) bool {
	had := len(v.References)
	for _, r := range refs {
		if r != v.Session && len(v.References) < maxReferences && !slices.Contains(v.References, r) {
			v.References = append(v.References, r)
		}
	}
	return len(v.References) > had
}

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
		if !store.IsConflict(err) {
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
