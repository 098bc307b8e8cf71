package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// newEvent is a user message of session, event id <session>-<id>.
func newEvent(id, session string) event.Event {
	return eventtest.NewSession("", session).Message(id, events.Message{UUID: "u-" + id, Role: events.RoleUser, Content: eventtest.Text("hi")})
}

func TestPublishAndBatch(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(js, "bad tenant"); !errors.Is(err, events.ErrInvalidID) {
		t.Fatalf("New with a bad tenant: %v", err)
	}
	c, err := client.New(js, "acme")
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Publish(ctx, newEvent("e1", "s1"))
	if err != nil || r.Seq != 1 || r.Duplicate {
		t.Fatalf("publish: %+v %v", r, err)
	}
	r, err = c.Publish(ctx, newEvent("e1", "s1"))
	if err != nil || r.Seq != 1 || !r.Duplicate {
		t.Fatalf("republish: %+v %v", r, err)
	}
	if _, err := c.Publish(ctx, newEvent("e2", "a.b")); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("invalid session: %v", err)
	}

	batch := []event.Event{newEvent("b1", "s1"), newEvent("b2", "s*"), newEvent("b3", "s1"), newEvent("e1", "s1")}
	res, err := c.PublishBatch(ctx, batch)
	if err == nil {
		t.Fatal("a batch with an invalid event reported no error")
	}
	if res[0].Seq != 2 || res[1].Err == nil || res[2].Seq != 3 || !res[3].Duplicate || res[3].Seq != 1 {
		t.Fatalf("batch results %+v", res)
	}
	layout := provision.Config{}.Layout()
	st, err := js.Stream(ctx, layout.Stream("acme", "s1"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.GetMsg(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != layout.Subject("acme", "s1") || m.Header.Get(jetstream.MsgIDHeader) != "acme:s1-b3" || m.Header.Get("ce-recalltenant") != "acme" {
		t.Fatalf("stored %s %v", m.Subject, m.Header)
	}
	info, _ := st.Info(ctx)
	if info.State.Msgs != 3 {
		t.Fatalf("%d stored, want 3", info.State.Msgs)
	}
}

// TestOrderedBatchStopsASessionAtItsFirstFailure: with Ordered, a publish
// that fails stops the rest of its session (so a retry stores them after
// it, in order) and not the other sessions; retrying the batch stores
// every event once, in order.
func TestOrderedBatchStopsASessionAtItsFirstFailure(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(js, "acme", client.Ordered())
	if err != nil {
		t.Fatal(err)
	}
	big := newEvent("2", "s1")
	_ = big.SetData(event.ApplicationJSON, events.Message{UUID: "u-big", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: strings.Repeat("x", 5000)}}})
	batch := []event.Event{newEvent("1", "s1"), newEvent("1", "s2"), big, newEvent("2", "s2"), newEvent("3", "s1")}
	// s1's shard stream refuses the big event for now, as it would refuse
	// a publish during a leader change; s2 is in another shard.
	layout := provision.Config{}.Layout()
	if layout.Shard("acme", "s1") == layout.Shard("acme", "s2") {
		t.Fatal("s1 and s2 share a shard: the test needs them apart")
	}
	st, err := js.Stream(ctx, layout.Stream("acme", "s1"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgSize = 4000
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res, err := c.PublishBatch(ctx, batch)
	if err == nil || res[0].Err != nil || res[1].Err != nil || res[3].Err != nil || res[2].Err == nil || !errors.Is(res[4].Err, client.ErrNotAttempted) {
		t.Fatalf("first attempt: %v %+v", err, res)
	}
	cfg.MaxMsgSize = -1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if res, err = c.PublishBatch(ctx, batch); err != nil || !res[0].Duplicate || res[2].Duplicate || res[4].Duplicate {
		t.Fatalf("retry: %v %+v", err, res)
	}
	// s1's records are stored in the batch's order.
	var ids []string
	for seq := uint64(1); seq <= 3; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject == layout.Subject("acme", "s1") {
			ids = append(ids, m.Header.Get("ce-id"))
		}
	}
	if strings.Join(ids, ",") != "s1-1,s1-2,s1-3" {
		t.Fatalf("s1 stored as %v", ids)
	}
}

// TestBatchWaitsForRoomWhenTheServerIsSlow publishes a batch larger than
// the connection's window of unacknowledged publishes while acknowledgements
// take longer than nats.go's stall wait (200 ms): the batch slows down and
// every event is stored, none fails with "stalled". The acknowledgements come
// from a slow responder on the transcript subject standing in for a stream
// that is busy.
func TestBatchWaitsForRoomWhenTheServerIsSlow(t *testing.T) {
	s := natstest.Start(t)
	nc, _ := s.Connect(t)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2))
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Uint64
	layout := events.NewLayout(events.DefaultShards)
	sub, err := nc.Subscribe(events.TenantTranscripts("acme"), func(m *nats.Msg) {
		n := seq.Add(1)
		time.AfterFunc(300*time.Millisecond, func() {
			_ = m.Respond(fmt.Appendf(nil, `{"stream":%q,"seq":%d}`, layout.Stream("acme", "s1"), n))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// No stream records the shard count here: the client is told it.
	c, err := client.New(js, "acme", client.Shards(layout.Shards()))
	if err != nil {
		t.Fatal(err)
	}
	var batch []event.Event
	for i := range 6 {
		batch = append(batch, newEvent(fmt.Sprintf("w%d", i), "s1"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.PublishBatch(ctx, batch)
	if err != nil {
		t.Fatalf("a batch over a slow server failed: %v", err)
	}
	for i, r := range res {
		if r.Err != nil || r.Seq == 0 {
			t.Fatalf("event %d: %+v", i, r)
		}
	}
	if got := seq.Load(); got != 6 {
		t.Fatalf("the server received %d publishes, want 6", got)
	}
}

// TestLayoutIsReadFromTheServer: a client not told the shard count reads
// it from the shard streams (here 3, not the default) and publishes to the
// session's shard; with no shard streams its publish fails and says why.
func TestLayoutIsReadFromTheServer(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.New(js, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, newEvent("e0", "s1")); err == nil || !strings.Contains(err.Error(), events.TranscriptShardStream(0)) {
		t.Fatalf("publish with no shard streams: %v", err)
	}
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 2, Shards: 3, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Layout(ctx); err != nil || l != events.NewLayout(3) {
		t.Fatalf("Layout() = %v, %v; want 3 shards", l, err)
	}
	want := events.NewLayout(3)
	for _, session := range []string{"s1", "s2", "s3", "s4"} {
		r, err := c.Publish(ctx, newEvent("e", session))
		if err != nil {
			t.Fatal(err)
		}
		st, err := js.Stream(ctx, want.Stream("acme", session))
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetMsg(ctx, r.Seq)
		if err != nil || m.Subject != want.Subject("acme", session) || m.Header.Get("ce-id") != session+"-e" {
			t.Fatalf("%s stored at %d of %s: %v %v", session, r.Seq, want.Stream("acme", session), m, err)
		}
	}
}
