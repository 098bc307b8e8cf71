package eventtest_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
)

// conversation is one of each kind of event the builder makes.
func conversation(s eventtest.Session) []event.Event {
	return []event.Event{
		s.Started("start", events.SessionStarted{UserID: "u1"}),
		s.User("m1", "Run the tests."),
		s.Peer("m2", "bob", "I prefer tabs."),
		s.ToolUse("m3", "t1", "Bash", `{"command":"go test ./..."}`),
		s.ToolResult("m4", "t1", "ok", false),
		s.Assistant("m5", "All green."),
		s.Compacted("c1", events.SessionCompacted{Trigger: "auto"}),
		s.Ended("end"),
	}
}

// TestEventsAreValidIngest: every event the builder makes is one ingest
// accepts, with the id, subject and source a test expects.
func TestEventsAreValidIngest(t *testing.T) {
	for _, e := range conversation(eventtest.NewSession("", "s1")) {
		if _, err := events.ValidateIngest(e, "acme"); err != nil {
			t.Errorf("%s (%s): %v", e.ID(), e.Type(), err)
		}
		if e.Subject() != "s1" || e.Source() != eventtest.DefaultSource || len(e.ID()) < 4 || e.ID()[:3] != "s1-" {
			t.Errorf("attributes: id %q subject %q source %q", e.ID(), e.Subject(), e.Source())
		}
		if _, ok := e.Extensions()[events.ExtTenant]; ok {
			t.Errorf("%s carries a tenant its session has not", e.ID())
		}
	}
}

// TestPublishStoresOnTheSessionShard: published events are stored in
// order on their session's shard and read back by the transcript reader
// as the records they describe.
func TestPublishStoresOnTheSessionShard(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	layout := events.NewLayout(events.DefaultShards)
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 1, Shards: events.DefaultShards, MemoryStorage: true}); err != nil {
		t.Fatal(err)
	}
	evs := conversation(eventtest.NewSession("acme", "s1"))
	seqs := eventtest.Publish(ctx, t, js, layout, evs...)
	var got []transcript.Record
	err := transcript.NewReader(nc, layout).Scan(ctx, "acme", "s1", 1, 0, func(r transcript.Record) bool {
		got = append(got, r)
		return true
	})
	if err != nil || len(got) != len(evs) {
		t.Fatalf("read %d records, %v; want %d", len(got), err, len(evs))
	}
	for i, r := range got {
		if r.Seq != seqs[i] || r.Event.ID() != evs[i].ID() || r.Event.Type() != evs[i].Type() {
			t.Fatalf("record %d: seq %d id %s type %s, published seq %d id %s", i, r.Seq, r.Event.ID(), r.Event.Type(), seqs[i], evs[i].ID())
		}
	}
	if got[0].Started == nil || got[0].Started.UserID != "u1" {
		t.Fatalf("the start: %+v", got[0].Started)
	}
	peer, tool := got[2].Message, got[3].Message
	if peer == nil || peer.PeerID != "bob" || peer.UUID != "m2" || tool == nil || tool.Content.ToolUses() != 1 {
		t.Fatalf("messages: %+v %+v", peer, tool)
	}
	if got[4].Message == nil || got[4].Message.Content[0].ToolUseID != "t1" || got[7].Event.Type() != events.TypeSessionEnded {
		t.Fatalf("tool result %+v, last %s", got[4].Message, got[7].Event.Type())
	}
}

// TestMapIsTheStructuredForm: Map is the event's structured JSON, which
// decodes back to the same event.
func TestMapIsTheStructuredForm(t *testing.T) {
	e := eventtest.NewSession("", "s1").User("m1", "hi")
	m := eventtest.Map(e)
	if m["specversion"] != "1.0" || m["id"] != "s1-m1" || m["subject"] != "s1" || m["type"] != events.TypeMessage {
		t.Fatalf("map: %v", m)
	}
	b, _ := json.Marshal(eventtest.Maps(e))
	var back []event.Event
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 1 || back[0].ID() != e.ID() {
		t.Fatalf("decoded %v, %v", back, err)
	}
	raw := eventtest.Map(eventtest.NewSession("", "s1").Event("raw", events.TypeMessage, []byte(`{"uuid":"r","role":"user","content":"hi"}`)))
	if _, ok := raw["data"].(map[string]any); !ok || raw["data_base64"] != nil {
		t.Fatalf("JSON text given as bytes is not the event's JSON data: %v", raw)
	}
	m1, err := events.DecodeMessage(back[0].Data())
	if err != nil || m1.UUID != "m1" || m1.Role != events.RoleUser || m1.Content[0].Text != "hi" {
		t.Fatalf("decoded data %+v, %v", m1, err)
	}
}
