package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/internal/embedded"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// A platform sends a session's messages to Recall's HTTP edge. Sending the
// same event again (a retry after a lost reply) stores it once; an event
// the edge refuses says why, and whether a retry could help.
func Example_http() {
	dir, _ := os.MkdirTemp("", "recall-example")
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	edge, err := ingestsvc.Start(ctx, ingestsvc.Config{NATS: natsconn.Config{URL: srv.ClientURL()},
		Config: provision.Config{Partitions: 1, MemoryStorage: true}, HTTPAddr: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer edge.Shutdown(context.Background())

	// Open mode: no token, tenant "default". Give Token for a tenant.
	c, _ := client.NewHTTP(client.HTTPConfig{URL: "http://" + edge.Addr()})
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

	e.SetSubject("s1.bad")
	_, err = c.Publish(ctx, e)
	fmt.Println(client.Status(err), client.Retryable(err))
	// Output:
	// 1 false
	// 1 true
	// 400 false
}
