package client_test

import (
	"context"
	"testing"

	"github.com/recallhq/recall/internal/benchgen"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// BenchmarkMsg measures what the client adds per event before publishing:
// validation, binary-mode encoding, Nats-Msg-Id and trace injection.
func BenchmarkMsg(b *testing.B) {
	evs := benchgen.New(1).Interleaved(benchgen.SessionIDs("s", 50), 1000)
	// The client asks its connection for the server's max payload.
	_, js := natstest.Start(b).Connect(b)
	c, err := client.New(js, "bench", client.Shards(events.DefaultShards))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Msg(ctx, evs[i%len(evs)]); err != nil {
			b.Fatal(err)
		}
	}
}
