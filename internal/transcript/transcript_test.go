package transcript

import (
	"context"
	"fmt"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// testConfig is what the tests provision; testLayout is its transcript's
// shards.
var (
	testConfig = provision.Config{Partitions: 2}
	testLayout = testConfig.Layout()
)

// sibling returns a session of tenant stored in the same shard as session
// (same) or in another shard.
func sibling(t *testing.T, tenant, session string, same bool) string {
	t.Helper()
	for i := range 1000 {
		s := fmt.Sprint("s", i)
		if (testLayout.Shard(tenant, s) == testLayout.Shard(tenant, session)) == same {
			return s
		}
	}
	t.Fatalf("no session in %d shards is in the same shard as %s: %v", testLayout.Shards(), session, same)
	return ""
}

// msgEvent is message i of session: user and assistant in turn.
func msgEvent(session string, i int) event.Event {
	role := events.RoleUser
	if i%2 == 1 {
		role = events.RoleAssistant
	}
	return eventtest.NewSession("", session).Message(fmt.Sprint(i), events.Message{UUID: fmt.Sprintf("u%d", i), Role: role,
		Content: eventtest.Text(fmt.Sprint("message ", i))})
}

func TestReadRanges(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, testConfig); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(js, "t1")
	if err != nil {
		t.Fatal(err)
	}
	// Interleave a session of a's shard, so per-session reads must skip
	// it, and one of another shard.
	same, other := sibling(t, "t1", "a", true), sibling(t, "t1", "a", false)
	var evs []event.Event
	for i := 0; i < 25; i++ {
		evs = append(evs, msgEvent("a", i), msgEvent(same, i), msgEvent(other, i))
	}
	if _, err := c.PublishBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	r := NewReader(nc, testLayout)
	r.batch = 7 // force several round trips
	if r.Layout() != testLayout {
		t.Fatalf("Layout() = %v, want %v", r.Layout(), testLayout)
	}
	for _, s := range []string{same, other} {
		if recs, err := r.Read(ctx, "t1", s, 0, 0, 0); err != nil || len(recs) != 25 {
			t.Fatalf("session %s: %d records, %v; want 25", s, len(recs), err)
		}
	}

	all, err := r.Read(ctx, "t1", "a", 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 25 {
		t.Fatalf("read %d records of session a, want 25", len(all))
	}
	for i, rec := range all {
		if rec.Message == nil || rec.Message.UUID != fmt.Sprintf("u%d", i) {
			t.Fatalf("record %d = %+v", i, rec.Message)
		}
		if i > 0 && rec.Seq <= all[i-1].Seq {
			t.Fatalf("sequences not increasing at %d", i)
		}
	}
	from, to := all[5].Seq, all[14].Seq
	part, err := r.Read(ctx, "t1", "a", from, to, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(part) != 10 || part[0].Seq != from || part[9].Seq != to {
		t.Fatalf("range read got %d records", len(part))
	}
	lim, err := r.Read(ctx, "t1", "a", from, 0, 3)
	if err != nil || len(lim) != 3 {
		t.Fatalf("limited read: %d, %v", len(lim), err)
	}
	last, err := r.LastSeq(ctx, "t1", "a")
	if err != nil || last != all[24].Seq {
		t.Fatalf("LastSeq = %d, %v; want %d", last, err, all[24].Seq)
	}
	none, err := r.Read(ctx, "t1", "nobody", 0, 0, 0)
	if err != nil || len(none) != 0 {
		t.Fatalf("empty session: %d, %v", len(none), err)
	}
	if last, err := r.LastSeq(ctx, "t1", "nobody"); err != nil || last != 0 {
		t.Fatalf("LastSeq of empty session = %d, %v", last, err)
	}
}
