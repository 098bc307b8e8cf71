package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
)

// TestLostAckIsResent: JetStream stores an event but its acknowledgement
// never reaches the client (a proxy drops it, as a node dying between the
// two would). Publish — with the default attempt timeout — and
// PublishBatch send the event again with the same id: JetStream answers
// it as a duplicate of the stored one, nothing is stored twice and no
// error reaches the caller.
func TestLostAckIsResent(t *testing.T) {
	s := natstest.Start(t)
	_, direct := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := provision.Config{Partitions: 2, MemoryStorage: true}
	if err := provision.Ensure(ctx, direct, cfg); err != nil {
		t.Fatal(err)
	}
	proxy := natstest.DropReplies(t, s.Addr().String(), "_INBOX.", 1)
	nc, err := nats.Connect(proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	c, _ := client.New(js, "acme", client.Shards(cfg.Layout().Shards()))
	r, err := c.Publish(ctx, newEvent("e1", "s1"))
	if err != nil || !r.Duplicate || r.Seq != 1 || proxy.Dropped() != 1 {
		t.Fatalf("publish with its ack lost: %+v %v (%d dropped)", r, err, proxy.Dropped())
	}

	proxy2 := natstest.DropReplies(t, s.Addr().String(), "_INBOX.", 1)
	nc2, err := nats.Connect(proxy2.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	js2, _ := jetstream.New(nc2)
	c2, _ := client.New(js2, "acme", client.Shards(cfg.Layout().Shards()), client.AttemptTimeout(300*time.Millisecond))
	var batch []event.Event
	for i := range 10 {
		batch = append(batch, newEvent(fmt.Sprintf("b%d", i), "s1"))
	}
	res, err := c2.PublishBatch(ctx, batch)
	if err != nil || proxy2.Dropped() != 1 {
		t.Fatalf("batch with one ack lost: %v (%d dropped)", err, proxy2.Dropped())
	}
	dups := 0
	for _, r := range res {
		if r.Duplicate {
			dups++
		}
	}
	if dups != 1 {
		t.Fatalf("%d duplicates in %+v, want the one resent", dups, res)
	}
	st, _ := direct.Stream(ctx, cfg.Layout().Stream("acme", "s1"))
	info, _ := st.Info(ctx)
	if info.State.Msgs != 11 {
		t.Fatalf("%d events stored, want 11", info.State.Msgs)
	}
}
