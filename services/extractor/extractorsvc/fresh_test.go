package extractorsvc

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/extractor/extractorsvc/extractortest"
)

// TestReadFreshFromLeader: the decision read goes to the stream leader and
// sees absent, stored and deleted memory as ReadMemory does; a read older
// than a revision the worker knows of is repeated until the newer revision
// is visible (here: committed 300 ms later).
func TestReadFreshFromLeader(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv, err := e.js.KeyValue(ctx, events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{nc: e.nc, memory: kv}
	key := events.MemoryKey("acme", "s1")
	if got, err := w.readFresh(ctx, key); err != nil || got.revision != 0 {
		t.Fatalf("absent key: %+v, %v", got, err)
	}
	body, _ := json.Marshal(events.MemoryRecord{Notes: "one", CoveredSeq: 7})
	rev, err := kv.Put(ctx, key, body)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.readFresh(ctx, key)
	if err != nil || got.revision != rev || got.record.Notes != "one" || got.record.CoveredSeq != 7 {
		t.Fatalf("stored key: %+v, %v (want revision %d)", got, err, rev)
	}

	// The worker knows of a newer revision than the leader shows yet.
	body2, _ := json.Marshal(events.MemoryRecord{Notes: "two", CoveredSeq: 9})
	w.known.note(key, rev+1)
	time.AfterFunc(300*time.Millisecond, func() { _, _ = kv.Put(context.Background(), key, body2) }) // the commit lands later
	start := time.Now()
	got, err = w.readFresh(ctx, key)
	if err != nil || got.revision != rev+1 || got.record.Notes != "two" {
		t.Fatalf("read older than a known commit: %+v, %v", got, err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > freshWait {
		t.Fatalf("fresh read returned after %v", d)
	}

	if err := kv.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	w.known = knownRevs{}
	if got, err := readLeader(ctx, e.nc, key); err != nil || got.revision != 0 {
		t.Fatalf("deleted key: %+v, %v", got, err)
	}
}

// TestReadyOnlyWhenJoined: a worker is not ready before it has opened its
// buckets and joined the group, and is ready once it has.
func TestReadyOnlyWhenJoined(t *testing.T) {
	e := newEnv(t)
	nc, err := nats.Connect(e.srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	w, err := NewWorker(nc, testConfig("ready-1"), &extractortest.EditProvider{}, e.log)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Ready(); err == nil {
		t.Fatal("ready before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testpoll.Until(t, 10*time.Second, "the worker to be ready", func() bool { return w.Ready() == nil })
	if !slices.Contains(w.Group().Members(), "ready-1") {
		t.Fatalf("ready but not a member: %v", w.Group().Members())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
