package erase

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// notifications follows the notifications published from now on (headers
// only, an ordered consumer) and erases again a tombstoned session that
// gets one, erase announcements excepted. It returns once the consumer
// runs; the consumer stops when ctx is done.
func (g *guard) notifications(ctx context.Context) error {
	c, err := g.e.js.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{events.SubjectEventsRoot + ".>"},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
		HeadersOnly:    true,
	})
	if err != nil {
		return fmt.Errorf("following %s: %w", events.StreamEvents, err)
	}
	cc, err := c.Consume(func(m jetstream.Msg) {
		kind := strings.TrimPrefix(m.Subject(), events.SubjectEventsRoot+".")
		kind, _, _ = strings.Cut(kind, ".")
		if kind == events.KindSessionErased || kind == events.KindUserErased {
			return
		}
		if tenant, session, ok := events.SplitSessionSubject(m.Subject()); ok {
			g.check(ctx, tenant, session)
		}
	})
	if err != nil {
		return fmt.Errorf("following %s: %w", events.StreamEvents, err)
	}
	go func() { <-ctx.Done(); cc.Stop() }()
	return nil
}
