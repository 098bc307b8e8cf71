package eventpub_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventpub"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/pkg/events/natsce"
)

func TestPublishSharesOneShape(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	p := eventpub.New(js, "tester")
	keyed := eventpub.Event{Type: "dev.recall.test", Tenant: "acme", Session: "s1", Key: "acme:s1:7", Data: map[string]int{"n": 1}}
	for range 2 { // a re-emission of the same effect is stored once
		if err := p.Publish(ctx, "ev.a", keyed); err != nil {
			t.Fatal(err)
		}
	}
	unkeyed := eventpub.Event{Type: "dev.recall.test", Tenant: "acme", Session: "s1", Data: map[string]int{"n": 2}}
	for range 2 { // without a key every event is its own
		if err := p.Publish(ctx, "ev.b", unkeyed); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := js.Stream(ctx, "EV")
	info, _ := st.Info(ctx)
	if info.State.Msgs != 3 {
		t.Fatalf("stored %d events, want 3 (one keyed, two unkeyed)", info.State.Msgs)
	}
	raw, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	e, err := natsce.Decode(raw.Header, raw.Data)
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != "acme:s1:7" || e.Source() != "/recall/tester" || e.Subject() != "s1" || e.Extensions()["recalltenant"] != "acme" {
		t.Fatalf("event attributes: %s", e.String())
	}
	if _, off := e.Time().Zone(); off != 0 || e.Time().IsZero() {
		t.Fatalf("time %v is not UTC", e.Time())
	}
	if got := raw.Header.Get(jetstream.MsgIDHeader); got != "acme:s1:7" {
		t.Fatalf("Nats-Msg-Id %q, want the key", got)
	}
	if err := p.Publish(ctx, "nowhere.x", unkeyed); err == nil || !strings.Contains(err.Error(), "dev.recall.test on nowhere.x") {
		t.Fatalf("publishing without a stream: %v", err)
	}
}
