package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

func newEvent(id, session string) event.Event {
	e := event.New()
	e.SetID(id)
	e.SetSource("test")
	e.SetType(events.TypeMessage)
	e.SetSubject(session)
	_ = e.SetData(event.ApplicationJSON, events.Message{UUID: "u-" + id, Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "hi"}}})
	return e
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
	st, _ := js.Stream(ctx, events.StreamTranscript)
	m, err := st.GetMsg(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != events.TranscriptSubject("acme", "s1") || m.Header.Get(jetstream.MsgIDHeader) != "acme:b3" || m.Header.Get("ce-recalltenant") != "acme" {
		t.Fatalf("stored %s %v", m.Subject, m.Header)
	}
	info, _ := st.Info(ctx)
	if info.State.Msgs != 3 {
		t.Fatalf("%d stored, want 3", info.State.Msgs)
	}
}
