package erase

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// testConfig is what setup provisions; testLayout is its transcript's
// shards.
var (
	testConfig = provision.Config{Partitions: 2, MemoryStorage: true}
	testLayout = testConfig.Layout()
)

func setup(t *testing.T) (jetstream.JetStream, context.Context) {
	t.Helper()
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := provision.Ensure(ctx, js, testConfig); err != nil {
		t.Fatal(err)
	}
	return js, ctx
}

func kvPut(t *testing.T, ctx context.Context, js jetstream.JetStream, bucket, key string, v any) {
	t.Helper()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := v.([]byte)
	if !ok {
		b, _ = json.Marshal(v)
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		t.Fatal(err)
	}
}

func publish(t *testing.T, ctx context.Context, js jetstream.JetStream, subject, data string) {
	t.Helper()
	if _, err := js.Publish(ctx, subject, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

// seed stores a session of tenant t1 with something in every part.
func seed(t *testing.T, ctx context.Context, js jetstream.JetStream, session string) {
	publish(t, ctx, js, testLayout.Subject("t1", session), `{"secret":"MARKER"}`)
	publish(t, ctx, js, testLayout.Subject("t1", session), `{"secret":"MARKER 2"}`)
	publish(t, ctx, js, events.EventsSubject(events.KindExtractionCompleted, "t1", session), `{}`)
	for i := range 3 {
		kvPut(t, ctx, js, events.BucketMemory, events.MemoryKey("t1", session), events.MemoryRecord{Notes: "MARKER " + string(rune('a'+i))})
	}
	kvPut(t, ctx, js, events.BucketIndex, events.MemoryKey("t1", session), events.SessionIndex{Tenant: "t1", Session: session, Name: "the-" + session, UserID: "u1"})
	kvPut(t, ctx, js, events.BucketIndex, "names.t1.the-"+session, []byte(session))
	kvPut(t, ctx, js, events.BucketParked, events.MemoryKey("t1", session)+".7", []byte(`{"x":"MARKER"}`))
	obs, err := js.ObjectStore(ctx, events.BucketBlobs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(ctx, events.BlobName("t1", session, "e1", "abcdef0123456789"), []byte("MARKER body")); err != nil {
		t.Fatal(err)
	}
}

func TestEraseSessionReceiptAndIdempotency(t *testing.T) {
	js, ctx := setup(t)
	seed(t, ctx, js, "s1")
	seed(t, ctx, js, "keep")
	key := events.LTMKey("t1", "u1", "", "profile")
	kvPut(t, ctx, js, events.BucketLTM, key, events.StoredMemoryDocument{Content: "kept fact", Session: "keep"})
	kvPut(t, ctx, js, events.BucketLTM, key, events.StoredMemoryDocument{Content: "MARKER fact", Session: "s1"})
	kvPut(t, ctx, js, events.BucketLTM, key, events.StoredMemoryDocument{Content: "MARKER fact 2", Session: "s1"})
	e := New(js, testLayout, Config{Drain: time.Millisecond}, nil, nil)

	r, err := e.Session(ctx, "t1", "s1", Actor{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		store, what string
		want        uint64
	}{
		{testLayout.Stream("t1", "s1"), "transcript", 2},
		{events.StreamEvents, "notifications", 1},
		{events.BucketMemory, "memory", 3},
		{events.BucketIndex, "index entry", 1},
		{events.BucketIndex, "name claim", 1},
		{events.BucketParked, "parked requests", 1},
		{events.BucketBlobs, "claim-checked bodies", 1},
		{events.BucketLTM, "long-term memory revisions", 2},
	} {
		if got := r.Count(tc.store, tc.what); got != tc.want {
			t.Errorf("%s %s: removed %d, want %d", tc.store, tc.what, got, tc.want)
		}
	}
	if r.Total != 12 || r.TombstoneUntil.Before(time.Now().Add(23*time.Hour)) {
		t.Errorf("receipt total %d, tombstone until %v", r.Total, r.TombstoneUntil)
	}
	if b, _ := json.Marshal(r); bytes.Contains(b, []byte("MARKER")) {
		t.Errorf("the receipt holds content: %s", b)
	}
	if _, ok := e.Tombstones().Erased("t1", "s1"); !ok {
		t.Error("the session is not tombstoned")
	}

	again, err := e.Session(ctx, "t1", "s1", Actor{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Total != 0 || len(again.Parts) != 0 {
		t.Errorf("a second erase removed %+v", again.Parts)
	}
	// The user's document reads as it was before the session.
	ltm, _ := js.KeyValue(ctx, events.BucketLTM)
	if doc, err := ltm.Get(ctx, key); err != nil || !bytes.Contains(doc.Value(), []byte("kept fact")) {
		t.Errorf("the user's document after the erase: %v", err)
	}
	// The other session is untouched.
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	if _, err := mem.Get(ctx, events.MemoryKey("t1", "keep")); err != nil {
		t.Errorf("the other session's memory: %v", err)
	}
	if _, err := mem.Get(ctx, events.MemoryKey("t1", "s1")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the erased session's memory: %v", err)
	}
	ts, err := js.Stream(ctx, testLayout.Stream("t1", "keep"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := ts.Info(ctx, jetstream.WithSubjectFilter(testLayout.Subject("t1", "keep")))
	if err != nil || info.State.Subjects[testLayout.Subject("t1", "keep")] != 2 {
		t.Errorf("the other session's transcript: %v %v", info.State.Subjects, err)
	}
}

func TestGuardRemovesLateWrites(t *testing.T) {
	js, ctx := setup(t)
	seed(t, ctx, js, "s1")
	e := New(js, testLayout, Config{Drain: time.Millisecond}, nil, nil)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := e.Guard(gctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Session(ctx, "t1", "s1", Actor{}); err != nil {
		t.Fatal(err)
	}
	// An extraction that started before the erase commits afterwards (its
	// compare-and-set from revision 0 is a create, which succeeds).
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	if _, err := mem.Create(ctx, events.MemoryKey("t1", "s1"), []byte(`{"notes":"MARKER late"}`)); err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, js, events.EventsSubject(events.KindExtractionCompleted, "t1", "s1"), `{}`)
	testpoll.Until(t, 10*time.Second, "the late memory and notification are removed", func() bool {
		_, err := mem.Get(ctx, events.MemoryKey("t1", "s1"))
		s, _ := js.Stream(ctx, events.StreamEvents)
		info, _ := s.Info(ctx, jetstream.WithSubjectFilter(events.EventsSubject(events.KindExtractionCompleted, "t1", "s1")))
		return errors.Is(err, jetstream.ErrKeyNotFound) && info != nil && len(info.State.Subjects) == 0
	})
	// A second eraser (another ingest replica) learns the tombstone.
	other := New(js, testLayout, Config{}, nil, nil)
	if err := other.Guard(gctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Tombstones().Erased("t1", "s1"); !ok {
		t.Error("another replica does not know the tombstone")
	}
}

func TestEraseUser(t *testing.T) {
	js, ctx := setup(t)
	seed(t, ctx, js, "s1")
	seed(t, ctx, js, "s2")
	kvPut(t, ctx, js, events.BucketLTM, events.LTMKey("t1", "u1", "", "profile"), events.StoredMemoryDocument{Content: "MARKER likes tea"})
	kvPut(t, ctx, js, events.BucketLTM, events.LTMKey("t1", "u1", "", "profile"), events.StoredMemoryDocument{Content: "MARKER likes coffee"})
	kvPut(t, ctx, js, events.BucketLTM, events.LTMKey("t1", "u1", "bob", "profile"), events.StoredMemoryDocument{Content: "MARKER bob"})
	kvPut(t, ctx, js, events.BucketLTM, events.LTMKey("t1", "u2", "u1", "profile"), events.StoredMemoryDocument{Content: "MARKER about u1"})
	kvPut(t, ctx, js, events.BucketLTM, events.LTMKey("t1", "u2", "", "profile"), events.StoredMemoryDocument{Content: "u2 keeps this"})
	kvPut(t, ctx, js, events.BucketLTMState, events.CommitKey("t1", "s1"), events.CommitRecord{Tenant: "t1", Session: "s1", User: "u1"})
	e := New(js, testLayout, Config{Drain: time.Millisecond}, nil, nil)

	r, err := e.User(ctx, "t1", "u1", true, Actor{Operator: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Count(events.BucketLTM, "long-term memory"); got != 3 {
		t.Errorf("long-term memory: removed %d revisions, want 3", got)
	}
	if got := r.Count(events.BucketLTM, "peer documents about the user"); got != 1 {
		t.Errorf("peer documents: removed %d, want 1", got)
	}
	if len(r.Sessions) != 2 || r.Sessions[0].Session != "s1" || r.Sessions[0].Total == 0 {
		t.Errorf("sessions erased with the user: %+v", r.Sessions)
	}
	ltm, _ := js.KeyValue(ctx, events.BucketLTM)
	if _, err := ltm.Get(ctx, events.LTMKey("t1", "u2", "", "profile")); err != nil {
		t.Errorf("another user's memory: %v", err)
	}
	again, err := e.User(ctx, "t1", "u1", true, Actor{})
	if err != nil || again.Total != 0 || len(again.Sessions) != 0 {
		t.Errorf("a second user erase: %+v, %v", again, err)
	}
}

// TestGuardRemovesDirectRecords: a record a trusted producer publishes
// straight to the transcript after the erase is removed.
func TestGuardRemovesDirectRecords(t *testing.T) {
	js, ctx := setup(t)
	e := New(js, testLayout, Config{Drain: time.Millisecond}, nil, nil)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := e.Guard(gctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Session(ctx, "t1", "s1", Actor{}); err != nil {
		t.Fatal(err)
	}
	publish(t, ctx, js, testLayout.Subject("t1", "s1"), `{"secret":"MARKER direct"}`)
	s, err := js.Stream(ctx, testLayout.Stream("t1", "s1"))
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "the direct record is removed", func() bool {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(testLayout.Subject("t1", "s1")))
		return err == nil && len(info.State.Subjects) == 0
	})
}

// TestWritesDuringTheDrainAreTheErasesToCount: a record stored while an
// erase drains is purged by the erase and counted in its receipt — the
// guard waits for the drain to end (it used to erase the session first,
// leaving the receipt empty) — and a write after the erase is still
// removed by the guard.
func TestWritesDuringTheDrainAreTheErasesToCount(t *testing.T) {
	js, ctx := setup(t)
	seed(t, ctx, js, "s1")
	e := New(js, testLayout, Config{Drain: 600 * time.Millisecond}, nil, nil)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := e.Guard(gctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan events.EraseReceipt, 1)
	go func() {
		r, err := e.Session(ctx, "t1", "s1", Actor{})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	testpoll.Until(t, 5*time.Second, "the tombstone", func() bool { _, ok := e.Tombstones().Erased("t1", "s1"); return ok })
	// A late effect during the drain: a record and a notification.
	publish(t, ctx, js, testLayout.Subject("t1", "s1"), `{"secret":"MARKER during the drain"}`)
	publish(t, ctx, js, events.EventsSubject(events.KindCompactionServed, "t1", "s1"), `{}`)
	r := <-done
	shard := testLayout.Stream("t1", "s1")
	if got := r.Count(shard, ""); got != 3 {
		t.Fatalf("the receipt counts %d records of %s, want 3 (two seeded, one during the drain): %+v", got, shard, r)
	}
	publish(t, ctx, js, testLayout.Subject("t1", "s1"), `{"secret":"MARKER after"}`)
	s, err := js.Stream(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	testpoll.Until(t, 10*time.Second, "the late record is removed", func() bool {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(testLayout.Subject("t1", "s1")))
		return err == nil && len(info.State.Subjects) == 0
	})
}
