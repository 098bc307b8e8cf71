package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// triggerConsumers returns the trigger's consumer on every transcript
// shard stream (the layout read from the server), in shard order.
func triggerConsumers(ctx context.Context, js jetstream.JetStream) ([]*jetstream.ConsumerInfo, error) {
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		return nil, err
	}
	out := make([]*jetstream.ConsumerInfo, 0, layout.Shards())
	for _, name := range layout.Streams() {
		c, err := js.Consumer(ctx, name, events.DurableTrigger)
		if err != nil {
			return nil, fmt.Errorf("the trigger's consumer on %s: %w", name, err)
		}
		ci, err := c.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("the trigger's consumer on %s: %w", name, err)
		}
		out = append(out, ci)
	}
	return out, nil
}

// pipelineState describes the trigger consumers, the work queue and the
// running extractions, for failure messages.
func pipelineState(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b strings.Builder
	cis, err := triggerConsumers(ctx, js)
	if err != nil {
		fmt.Fprintf(&b, "%v; ", err)
	}
	for _, ci := range cis {
		fmt.Fprintf(&b, "trigger consumer on %s: pending %d, ack pending %d, redelivered %d, delivered %d, ack floor %d; ",
			ci.Stream, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.Delivered.Stream, ci.AckFloor.Stream)
	}
	if s, err := js.Stream(ctx, events.StreamExtract); err == nil {
		if si, err := s.Info(ctx); err == nil {
			fmt.Fprintf(&b, "extract queue: %d msgs; ", si.State.Msgs)
		}
		names := s.ConsumerNames(ctx)
		for n := range names.Name() {
			if c, err := s.Consumer(ctx, n); err == nil {
				if ci, err := c.Info(ctx); err == nil {
					fmt.Fprintf(&b, "%s: pending %d ack pending %d waiting %d; ", n, ci.NumPending, ci.NumAckPending, ci.NumWaiting)
				}
			}
		}
	}
	if kv, err := js.KeyValue(ctx, events.BucketStatus); err == nil {
		if keys, err := kv.ListKeys(ctx); err == nil {
			var ks []string
			for k := range keys.Keys() {
				ks = append(ks, k)
			}
			fmt.Fprintf(&b, "status keys %v", ks)
		}
	}
	return b.String()
}

func countMap(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

// settled reports that the trigger's consumers have nothing pending on
// any shard, the extraction work queue is empty and no extraction is
// running.
func settled(js jetstream.JetStream) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cis, err := triggerConsumers(ctx, js)
	if err != nil {
		return false
	}
	for _, ci := range cis {
		if ci.NumPending > 0 {
			return false
		}
	}
	s, err := js.Stream(ctx, events.StreamExtract)
	if err != nil {
		return false
	}
	si, err := s.Info(ctx)
	if err != nil || si.State.Msgs > 0 {
		return false
	}
	kv, err := js.KeyValue(ctx, events.BucketStatus)
	if err != nil {
		return false
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return false
	}
	for range keys.Keys() {
		return false
	}
	return true
}
