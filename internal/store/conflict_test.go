package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

// TestIsConflict: a lost compare-and-set is a conflict however the server
// words it; other errors are not.
func TestIsConflict(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"create on an existing key", jetstream.ErrKeyExists, true},
		{"update at a stale revision", fmt.Errorf("updating: %w", jetstream.ErrKeyRevisionMismatch), true},
		{"single-server wrong last sequence (10071)", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence, Code: 400}, true},
		{"replicated wrong last sequence (10164)", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant, Code: 400}, true},
		{"the sentinel, wrapped", fmt.Errorf("writing: %w", store.ErrConflict), true},
		{"another API error", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamNotFound, Code: 404}, false},
		{"no error", nil, false},
		{"a plain error", errors.New("timeout"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := store.IsConflict(tc.err); got != tc.want {
				t.Fatalf("IsConflict(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if got := errors.Is(store.CAS(tc.err), store.ErrConflict); got != tc.want {
				t.Fatalf("CAS(%v) is ErrConflict: %v, want %v", tc.err, got, tc.want)
			}
			if tc.err != nil && !errors.Is(store.CAS(tc.err), tc.err) {
				t.Fatalf("CAS(%v) lost the server's error", tc.err)
			}
		})
	}
}

// TestConflictSingleNode: on one server every kind of compare-and-set
// that loses is ErrConflict.
func TestConflictSingleNode(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	assertConflicts(t, js, 1)
}

// TestConflictR3: on a three-node cluster with R3 buckets a lost race —
// the 10164 the replicated stream answers, which jetstream's KV does not
// map to a sentinel — is ErrConflict too.
func TestConflictR3(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	codes := assertConflicts(t, js, 3)
	t.Logf("API error codes of the lost compare-and-sets: %v", codes)
	if !codes[jetstream.JSErrCodeStreamWrongLastSequenceConstant] {
		t.Fatalf("no raw error with code 10164 on the R3 bucket (codes seen: %v); the replicated case was not exercised", codes)
	}
}

// assertConflicts makes a create, an update, a per-key-TTL write and a
// raced update lose on buckets of the given replicas, checks each is
// recognized as a conflict, and returns the API error codes the raw
// errors carried.
func assertConflicts(t *testing.T, js jetstream.JetStream, replicas int) map[jetstream.ErrorCode]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.BucketMemory, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[jetstream.ErrorCode]bool{}
	lost := func(what string, err error) {
		t.Helper()
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			codes[apiErr.ErrorCode] = true
		}
		if !store.IsConflict(err) || !errors.Is(store.CAS(err), store.ErrConflict) {
			t.Fatalf("%s: %v is not recognized as a conflict", what, err)
		}
	}
	m := store.NewMemory(kv)
	rev, err := m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "one"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = kv.Create(ctx, events.MemoryKey("acme", "s1"), []byte("{}"))
	lost("raw create over a record", err)
	_, err = m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "late"}, 0)
	lost("Commit create over a record", err)
	if _, err := m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "two"}, rev); err != nil {
		t.Fatal(err)
	}
	_, err = kv.Update(ctx, events.MemoryKey("acme", "s1"), []byte("{}"), rev)
	lost("raw update at a stale revision", err)
	_, err = m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "stale"}, rev)
	lost("Commit at a stale revision", err)
	// A race is run until a loser carries 10164 (a replicated stream
	// answers it to an update of a key whose write is still in flight), at
	// most 50 rounds; on one server every loser carries 10071.
	for round := 0; round < 50 && !codes[jetstream.JSErrCodeStreamWrongLastSequenceConstant]; round++ {
		for _, err := range raceUpdate(ctx, t, kv, events.MemoryKey("acme", fmt.Sprintf("race%d", round))) {
			lost("a raced update", err)
		}
	}

	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "TTLS", Replicas: replicas, LimitMarkerTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	trev, err := store.PutTTL(ctx, js, "TTLS", "k", []byte("v1"), time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = store.PutTTL(ctx, js, "TTLS", "k", []byte("v2"), time.Hour, trev+10)
	lost("PutTTL at a wrong revision", err)
	return codes
}

// raceUpdate has 16 writers update key at the same revision at once and
// returns the losers' raw errors; exactly one must win.
func raceUpdate(ctx context.Context, t *testing.T, kv jetstream.KeyValue, key string) []error {
	t.Helper()
	rev, err := kv.Create(ctx, key, []byte("0"))
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { _, errs[i] = kv.Update(ctx, key, fmt.Appendf(nil, "%d", i+1), rev) })
	}
	wg.Wait()
	var losses []error
	for _, err := range errs {
		if err != nil {
			losses = append(losses, err)
		}
	}
	if len(losses) != len(errs)-1 {
		t.Fatalf("a race of %d updates at revision %d had %d winners: %v", len(errs), rev, len(errs)-len(losses), errs)
	}
	return losses
}
