package natsconn

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Connection events, as recall_nats_connection_events_total counts them.
const (
	EventDisconnect   = "disconnect"
	EventReconnect    = "reconnect"
	EventClosed       = "closed"
	EventError        = "error"
	EventSlowConsumer = "slow_consumer"
)

var connEvents, _ = otel.Meter("recall/natsconn").Int64Counter("recall_nats_connection_events_total",
	metric.WithDescription("NATS connection events of Recall's clients, by connection name and event (disconnect, reconnect, closed, error, slow_consumer)"))

// Handlers are the options that make a connection say what happens to it:
// every disconnect, reconnect, close and asynchronous error (a slow
// consumer among them: the server or the client dropped messages because a
// subscription fell behind) is logged on log and counted in
// recall_nats_connection_events_total{conn, event}. A nil log is
// slog.Default().
func Handlers(name string, log *slog.Logger) []nats.Option {
	if log == nil {
		log = slog.Default()
	}
	log = log.With("conn", name)
	count := func(event string) {
		connEvents.Add(context.Background(), 1, metric.WithAttributes(attribute.String("conn", name), attribute.String("event", event)))
	}
	return []nats.Option{
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			count(EventDisconnect)
			log.Warn("NATS disconnected", "err", err, "server", nc.ConnectedUrlRedacted())
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			count(EventReconnect)
			log.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted(), "reconnects", nc.Reconnects)
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			count(EventClosed)
			log.Debug("NATS connection closed", "err", nc.LastError())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			if errors.Is(err, nats.ErrSlowConsumer) {
				count(EventSlowConsumer)
				log.Error("NATS slow consumer: a subscription fell behind and messages were dropped", "subject", subject, "err", err)
				return
			}
			count(EventError)
			log.Error("NATS asynchronous error", "subject", subject, "err", err)
		}),
	}
}
