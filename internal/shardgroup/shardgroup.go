// Package shardgroup shares the transcript's shards among the replicas of
// one service, so that each replica reads only the shards it owns and no
// replica receives a record it would drop.
//
// It is a consumer group (internal/pcgroup) whose partitions are the shards:
// partition k is the shard stream RECALL_TRANSCRIPT_<k> with the service's
// durable on it (the same name on every shard). Membership, assignment
// (rendezvous hashing with a bounded load, so S shards over R replicas give
// each ⌈S/R⌉ at most) and hand-over (a lost shard stops, its pin is
// released, the new owner is pinned at once) are pcgroup's. Each owned
// shard's records are handed to Handle one after the other, in stream order.
package shardgroup

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/follow"
	"github.com/recallhq/recall/internal/pcgroup"
	"github.com/recallhq/recall/pkg/events"
)

// Config describes one replica of a service that follows the transcript.
type Config struct {
	Layout events.Layout
	// Bucket is the membership bucket (per-key TTLs) and Member this
	// replica's id in it (pcgroup.MemberID).
	Bucket, Member string
	// Consumer is the durable created on every shard stream; its
	// PriorityGroups[0] must be set (the group pins one replica per shard).
	Consumer jetstream.ConsumerConfig
	// HeartbeatTTL is the membership heartbeat's TTL (default 10 s).
	HeartbeatTTL time.Duration
	// Handle settles one record.
	Handle func(ctx context.Context, m jetstream.Msg)
	Log    *slog.Logger
}

// Group is one replica's membership. Create it with New, run it with Run.
type Group struct {
	cfg       Config
	g         *pcgroup.Group
	consuming atomic.Int64 // shards with a live iterator
}

// New returns a member of the group cfg describes.
func New(js jetstream.JetStream, cfg Config) (*Group, error) {
	if len(cfg.Consumer.PriorityGroups) == 0 || cfg.Consumer.Durable == "" || cfg.Handle == nil {
		return nil, fmt.Errorf("shardgroup: the consumer needs a durable name and a priority group, and Handle is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	sg := &Group{cfg: cfg}
	n := cfg.Layout.Shards()
	g, err := pcgroup.New(js, pcgroup.Config{
		StreamOf: func(k int) string { return events.TranscriptShardStream(k) }, Partitions: n,
		Durable:       func(int) string { return cfg.Consumer.Durable },
		PriorityGroup: cfg.Consumer.PriorityGroups[0], Bucket: cfg.Bucket, Member: cfg.Member,
		HeartbeatTTL: cfg.HeartbeatTTL, AckWait: cfg.Consumer.AckWait, PinnedTTL: cfg.Consumer.PinnedTTL, Log: cfg.Log,
		// Replicas started together take their shards once instead of
		// one taking all and handing them over a moment later.
		Settle:   time.Second,
		Consumer: sg.consumer,
		Consume:  sg.consume,
	}, nil)
	if err != nil {
		return nil, err
	}
	sg.g = g
	return sg, nil
}

func (sg *Group) consumer(k int) jetstream.ConsumerConfig {
	c := sg.cfg.Consumer
	c.Description = fmt.Sprintf("%s (shard %d of %d)", c.Description, k, sg.cfg.Layout.Shards())
	c.FilterSubject, c.FilterSubjects = "", nil // a shard stream holds nothing else
	return c
}

func (sg *Group) consume(ctx context.Context, k int, cons jetstream.Consumer) error {
	live := func(on bool) {
		if on {
			sg.consuming.Add(1)
		} else {
			sg.consuming.Add(-1)
		}
	}
	return follow.Messages(ctx, cons, sg.cfg.Consumer.PriorityGroups[0], sg.cfg.Log.With("shard", k), live, sg.cfg.Handle)
}

// Run joins the group and follows the owned shards until ctx ends, then
// hands them over and returns nil. A failed join is retried every second.
func (sg *Group) Run(ctx context.Context) error {
	_ = pcgroup.Rejoin.Do(ctx, sg.cfg.Log, "joining the shard group "+sg.cfg.Bucket, func(context.Context) error { return sg.g.Run(ctx) })
	return nil
}

// Owned returns the shards this replica follows now.
func (sg *Group) Owned() []int { return sg.g.Owned() }

// Members returns the replicas this one sees.
func (sg *Group) Members() []string { return sg.g.Members() }

// Joined reports whether the replica is a member (it may own no shard when
// there are more replicas than shards).
func (sg *Group) Joined() bool { return len(sg.g.Members()) > 0 }

// Consuming is the number of shards with a live message iterator.
func (sg *Group) Consuming() int { return int(sg.consuming.Load()) }
