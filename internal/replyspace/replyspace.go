// Package replyspace keeps every reply of Recall's request-reply API inside
// the requester's reply space.
//
// A request on recall.api.<verb>.<tenant>.<session> was sent by that
// tenant's NATS user or by a Recall service: the generated permissions
// (internal/natsperm) let nobody else publish there. Its reply subject,
// though, is whatever the requester wrote, and a service that answered it
// blindly would publish with the service's own, wider permissions — into the
// JetStream API, another tenant's KV keys, transcript or inbox. So a reply is
// allowed only under events.InboxPrefix(tenant)+"." where tenant is the
// request subject's tenant token: the one place that tenant, and only it,
// may receive. Recall's own requesters (the HTTP edge, the CLI, pkg/client
// users) make their reply subjects there through pkg/chunked's Request
// (Inbox makes one the same way).
//
// Guard applies the rule to a micro endpoint: a request whose reply subject
// is outside the reply space never reaches the handler; it is dropped,
// logged and counted (recall_api_replies_dropped_total). A request without a
// reply subject passes: its handler publishes no reply.
package replyspace

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/recallhq/recall/pkg/events"
)

var (
	dropped           atomic.Uint64
	droppedCounter, _ = otel.Meter("recall/replyspace").Int64Counter("recall_api_replies_dropped_total",
		metric.WithDescription("API requests dropped because their reply subject lies outside the requesting tenant's inbox prefix, by verb"))
)

// Tenant returns the tenant of an API request subject
// (recall.api.<verb>.<tenant>.<session>), or false when subject is not one.
func Tenant(subject string) (string, bool) { return events.APITenant(subject) }

// Allowed reports whether a reply to a request on subject may be published
// on reply (events.ReplyAllowed: the rule is part of the wire contract).
func Allowed(subject, reply string) bool { return events.ReplyAllowed(subject, reply) }

// Inbox returns a fresh reply subject in the reply space of the tenant of
// the API subject, or "" when subject is not an API request subject.
func Inbox(subject string) string {
	tenant, ok := Tenant(subject)
	if !ok {
		return ""
	}
	return events.InboxPrefix(tenant) + "." + nuid.Next()
}

// Dropped is the number of requests Guard dropped in this process.
func Dropped() uint64 { return dropped.Load() }

// Guard wraps h so that it serves only requests whose reply subject Allowed
// accepts (or that have none). Others are dropped without any reply — not
// even an error, which would go to the same forbidden subject — logged at
// warning level with the subject and reply, and counted. Guard is safe for
// concurrent use if h is.
func Guard(log *slog.Logger, h micro.Handler) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		reply := req.Reply()
		if reply == "" || Allowed(req.Subject(), reply) {
			h.Handle(req)
			return
		}
		dropped.Add(1)
		verb := verbOf(req.Subject())
		droppedCounter.Add(context.Background(), 1, metric.WithAttributes(attribute.String("verb", verb)))
		log.Warn("dropped a request whose reply subject is outside the tenant's inbox prefix",
			"subject", req.Subject(), "reply", reply, "verb", verb)
	})
}

// verbOf is the verb token of an API subject, bounded for metric labels.
func verbOf(subject string) string {
	parts := strings.Split(subject, ".")
	if len(parts) == 5 {
		switch parts[2] {
		case events.VerbIngest, events.VerbCompact, events.VerbExtract, events.VerbMemory:
			return parts[2]
		}
	}
	return "other"
}
