package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// TestPublishLargeEvent: a 5 MB message — five times the server's
// max_payload — is published by a direct publisher: its data goes to the
// blob store, the record is a stub, and the transcript reader serves the
// whole message. Publishing it again stores nothing new; an event over
// MaxEventBytes is refused before anything is stored.
func TestPublishLargeEvent(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := provision.Config{Partitions: 2, MemoryStorage: true}
	if err := provision.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	c, _ := client.New(js, "acme")
	big := strings.Repeat("0123456789", 500_000) // 5 MB
	e := eventtest.NewSession("", "s1").Message("big", events.Message{UUID: "u-big", Role: events.RoleUser, Content: eventtest.Text(big)})
	r, err := c.Publish(ctx, e)
	if err != nil || r.Seq != 1 {
		t.Fatalf("publishing 5 MB: %+v %v", r, err)
	}
	if r, err := c.Publish(ctx, e); err != nil || !r.Duplicate {
		t.Fatalf("publishing it again: %+v %v", r, err)
	}
	recs, err := transcript.NewReader(nc, cfg.Layout()).Read(ctx, "acme", "s1", 1, 0, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("read %d records: %v", len(recs), err)
	}
	if got := recs[0].Message.Content[0].Text; got != big {
		t.Fatalf("served %d bytes of text, want %d", len(got), len(big))
	}
	stubs, err := transcript.NewReader(nc, cfg.Layout()).Stubs().Read(ctx, "acme", "s1", 1, 0, 0)
	if err != nil || stubs[0].ClaimCheck == nil {
		t.Fatalf("the stored record is not a claim check: %v", err)
	}

	huge := eventtest.NewSession("", "s1").Message("huge", events.Message{UUID: "u-huge", Role: events.RoleUser,
		Content: eventtest.Text(strings.Repeat("x", client.MaxEventBytes))})
	if _, err := c.Publish(ctx, huge); !errors.Is(err, events.ErrInvalidEvent) {
		t.Fatalf("publishing over MaxEventBytes: %v", err)
	}
}
