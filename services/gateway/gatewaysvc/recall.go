package gatewaysvc

import (
	"context"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// recall is the gateway's connection to Recall, set once NATS is up.
type recall struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// Attach gives the gateway its connection to Recall: from then on it
// captures and compacts. Until then (and whenever Recall fails) it
// forwards unchanged.
func (g *Gateway) Attach(nc *nats.Conn, js jetstream.JetStream) {
	g.recall.Store(&recall{nc: nc, js: js})
}

// detach stops using Recall (at shutdown, before the connection drains).
func (g *Gateway) detach(ctx context.Context) {
	g.recall.Store(nil)
}
