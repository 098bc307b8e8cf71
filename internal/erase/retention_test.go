package erase

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// TestRetentionSweep: a tenant's sweep erases the sessions last active
// before the cutoff and purges its older notifications; newer sessions,
// notifications and other tenants stay.
func TestRetentionSweep(t *testing.T) {
	js, ctx := setup(t)
	seed(t, ctx, js, "old")
	publish(t, ctx, js, events.EventsSubject(events.KindExtractionCompleted, "t2", "other"), `{}`)
	mid := time.Now()
	testpoll.Until(t, time.Second, "the clock moves on", func() bool { return time.Since(mid) > 5*time.Millisecond })
	seed(t, ctx, js, "new")
	e := New(js, testLayout, Config{Drain: time.Millisecond}, nil, nil)
	sw := e.Sweeper(SweepConfig{Batch: 10}, "test", nil)

	res, err := sw.Tenant(ctx, "t1", events.Retention{SessionMaxAge: "24h", NotificationsMaxAge: "1h"}, mid.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sessions) != 1 || res.Sessions[0].Session != "old" {
		t.Fatalf("swept %+v", res.Sessions)
	}
	if _, tombstoned := e.Tombstones().Erased("t1", "old"); tombstoned {
		t.Error("a session erased by retention is tombstoned: it could not resume")
	}
	mem, _ := js.KeyValue(ctx, events.BucketMemory)
	if _, err := mem.Get(ctx, events.MemoryKey("t1", "old")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the old session's memory: %v", err)
	}
	if _, err := mem.Get(ctx, events.MemoryKey("t1", "new")); err != nil {
		t.Errorf("the new session's memory: %v", err)
	}
	// With now = mid+24h every notification of t1 is older than 1h: all
	// are gone, t2's stay.
	s, _ := js.Stream(ctx, events.StreamEvents)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.EventsSubject("*", "*", "*")))
	if err != nil {
		t.Fatal(err)
	}
	for subject := range info.State.Subjects {
		if tenant, _, _ := events.SplitSessionSubject(subject); tenant == "t1" {
			t.Errorf("a notification of t1 older than its retention stays: %s", subject)
		}
	}
	if info.State.Subjects[events.EventsSubject(events.KindExtractionCompleted, "t2", "other")] != 1 {
		t.Errorf("another tenant's notification was purged: %v", info.State.Subjects)
	}
	if _, _, err := (&events.Retention{SessionMaxAge: "soon"}).Durations(); err == nil {
		t.Error("an invalid max age is accepted")
	}
}
