package client_test

import (
	"context"
	"fmt"
	"os"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// A trusted producer publishes a session's messages straight to the
// transcript (the session's shard stream; the client reads the shard count
// from the server once). Publishing the same event again (a retry) stores
// it once.
func Example() {
	dir, _ := os.MkdirTemp("", "recall-example")
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	nc, _ := nats.Connect(srv.ClientURL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	_ = provision.Ensure(ctx, js, provision.Config{Partitions: 2, MemoryStorage: true})

	c, _ := client.New(js, "acme")
	e := event.New()
	e.SetID("s1-u1")
	e.SetSource("/agents/coder")
	e.SetType(events.TypeMessage)
	e.SetSubject("s1")
	_ = e.SetData(event.ApplicationJSON, events.Message{UUID: "u1", Role: events.RoleUser,
		Content: events.Content{{Type: events.BlockText, Text: "Add a --by-month flag."}}})

	first, _ := c.Publish(ctx, e)
	again, _ := c.Publish(ctx, e)
	fmt.Println(first.Seq, first.Duplicate)
	fmt.Println(again.Seq, again.Duplicate)
	// Output:
	// 1 false
	// 1 true
}
