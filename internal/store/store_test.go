package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

func TestMemoryGetCommit(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: events.BucketMemory})
	if err != nil {
		t.Fatal(err)
	}
	m := store.NewMemory(kv)
	if rec, rev, err := m.Get(ctx, "acme", "s1"); err != nil || rev != 0 || rec.Notes != "" {
		t.Fatalf("absent: %+v %d %v", rec, rev, err)
	}
	rev, err := m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "one", CoveredSeq: 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "late"}, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create over an existing record: %v, want ErrConflict", err)
	}
	rev2, err := m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "two", CoveredSeq: 5}, rev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Commit(ctx, "acme", "s1", events.MemoryRecord{Notes: "stale"}, rev); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update at an old revision: %v, want ErrConflict", err)
	}
	rec, got, err := m.Get(ctx, "acme", "s1")
	if err != nil || got != rev2 || rec.Notes != "two" || rec.CoveredSeq != 5 {
		t.Fatalf("read back %+v at %d (%v), want two at %d", rec, got, err, rev2)
	}
	if _, err := kv.Put(ctx, events.MemoryKey("acme", "bad"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Get(ctx, "acme", "bad"); !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("corrupt record: %v, want ErrCorrupt", err)
	}
}

func TestPutTTL(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "TTLS", LimitMarkerTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := store.PutTTL(ctx, js, "TTLS", "k", []byte("v1"), time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutTTL(ctx, js, "TTLS", "k", []byte("v2"), time.Hour, rev+10); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("renewal at a wrong revision: %v, want ErrConflict", err)
	}
	if _, err := store.PutTTL(ctx, js, "TTLS", "k", []byte("v2"), time.Hour, rev); err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v2" {
		t.Fatalf("read back %v", err)
	}
	if _, err := store.PutTTL(ctx, js, "TTLS", "short", []byte("x"), time.Second, 0); err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "the per-key TTL expiring the key", func() bool {
		_, err := kv.Get(ctx, "short")
		return errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted)
	})
}

func TestPutSubjectFollowsTheAPIPrefix(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	if got := store.PutSubject(js, "B", "k"); got != "$KV.B.k" {
		t.Fatalf("default prefix: %q", got)
	}
	dj, err := jetstream.NewWithDomain(nc, "hub")
	if err != nil {
		t.Fatal(err)
	}
	if got := store.PutSubject(dj, "B", "k"); got != "$JS.hub.API.$KV.B.k" {
		t.Fatalf("domain hub: %q", got)
	}
	pj, err := jetstream.NewWithAPIPrefix(nc, "imported.JS")
	if err != nil {
		t.Fatal(err)
	}
	if got := store.PutSubject(pj, "B", "k"); got != "imported.JS.$KV.B.k" {
		t.Fatalf("API prefix imported.JS: %q", got)
	}
}
