package gatewaysvc

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// recall is the gateway's connection to Recall, set once NATS is up.
type recall struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	clients sync.Map // tenant → *client.Client (capture.go)
}

// Attach gives the gateway its connection to Recall: from then on it
// captures and compacts. Until then (and whenever Recall fails) it
// forwards unchanged.
func (g *Gateway) Attach(ctx context.Context, nc *nats.Conn, js jetstream.JetStream) {
	g.recall.Store(&recall{nc: nc, js: js})
	g.capture.start(ctx)
}

// detach stops using Recall (at shutdown, before the connection drains).
func (g *Gateway) detach(ctx context.Context) {
	g.capture.stop(ctx) // what is queued is published first
	g.recall.Store(nil)
}
