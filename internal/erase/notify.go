package erase

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/pkg/events"
)

// followedStream is a stream the guard follows, and its filter.
type followedStream struct{ stream, filter string }

// followed are the streams the guard follows: every transcript shard
// stream, then the notifications.
func (g *guard) followed() []followedStream {
	out := make([]followedStream, 0, g.e.layout.Shards()+1)
	for k, name := range g.e.layout.Streams() {
		out = append(out, followedStream{name, events.ShardSubjects(k)})
	}
	return append(out, followedStream{events.StreamEvents, events.SubjectEventsRoot + ".>"})
}

// follow follows the messages stored on the followed streams from now on
// (headers only, an ordered consumer each) and erases again a tombstoned
// session that gets one: the transcript records trusted producers publish
// directly (pkg/client, not through ingest's tombstone check) and the
// notifications, erase announcements excepted. It returns once the
// consumers run; they stop when ctx is done.
func (g *guard) follow(ctx context.Context) error {
	for _, f := range g.followed() {
		c, err := g.e.js.OrderedConsumer(ctx, f.stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{f.filter},
			DeliverPolicy:  jetstream.DeliverNewPolicy,
			HeadersOnly:    true,
			// Stopped when the last tombstone expires: the server drops
			// the consumer soon after, not minutes later.
			InactiveThreshold: 5 * time.Second,
		})
		if err != nil {
			return fmt.Errorf("following %s: %w", f.stream, err)
		}
		cc, err := c.Consume(func(m jetstream.Msg) {
			if isAnnouncement(m.Subject()) {
				return
			}
			if tenant, session, ok := events.SplitSessionSubject(m.Subject()); ok {
				g.check(ctx, tenant, session)
			}
		})
		if err != nil {
			return fmt.Errorf("following %s: %w", f.stream, err)
		}
		go func() { <-ctx.Done(); cc.Stop() }()
	}
	return nil
}

// isAnnouncement reports an erase announcement's subject.
func isAnnouncement(subject string) bool {
	kind, ok := strings.CutPrefix(subject, events.SubjectEventsRoot+".")
	if !ok {
		return false
	}
	kind, _, _ = strings.Cut(kind, ".")
	return kind == events.KindSessionErased || kind == events.KindUserErased
}
