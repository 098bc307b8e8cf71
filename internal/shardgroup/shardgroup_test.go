package shardgroup_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/shardgroup"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// seen records which member handled which record.
type seen struct {
	mu     sync.Mutex
	by     map[string][]string // subject+data → members
	shards map[string]map[int]bool
}

func (s *seen) handle(member string) func(context.Context, jetstream.Msg) {
	return func(_ context.Context, m jetstream.Msg) {
		k, _, _, _ := events.ParseTranscriptSubject(m.Subject())
		s.mu.Lock()
		s.by[m.Subject()+"/"+string(m.Data())] = append(s.by[m.Subject()+"/"+string(m.Data())], member)
		if s.shards[member] == nil {
			s.shards[member] = map[int]bool{}
		}
		s.shards[member][k] = true
		s.mu.Unlock()
		_ = m.Ack()
	}
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.by)
}

func consumer() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: "test-follower", Description: "test", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 5 * time.Second, MaxDeliver: -1, PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{"recall"}, PinnedTTL: 2 * time.Second}
}

func publish(t *testing.T, js jetstream.JetStream, layout events.Layout, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := js.Publish(context.Background(), layout.Subject("acme", fmt.Sprintf("s%d", i%40)), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMembersShareShards: two members split six shards, each record is
// handled once by the owner of its shard, and a member that leaves hands
// its shards to the other.
func TestMembersShareShards(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Connect(t)
	ctx := context.Background()
	cfg := provision.Config{Shards: 6, MemoryStorage: true}
	if err := provision.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	layout := cfg.Layout()
	s := &seen{by: map[string][]string{}, shards: map[string]map[int]bool{}}
	groups := map[string]*shardgroup.Group{}
	cancels := map[string]context.CancelFunc{}
	done := map[string]chan struct{}{}
	for _, member := range []string{"a", "b"} {
		_, mjs := srv.Connect(t)
		g, err := shardgroup.New(mjs, shardgroup.Config{Layout: layout, Bucket: events.BucketIndexMembers, Member: member,
			Consumer: consumer(), HeartbeatTTL: 2 * time.Second, Handle: s.handle(member)})
		if err != nil {
			t.Fatal(err)
		}
		gctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		groups[member], cancels[member], done[member] = g, cancel, stopped
		go func() { defer close(stopped); _ = g.Run(gctx) }()
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	testpoll.Until(t, 15*time.Second, "both members consuming three shards each", func() bool {
		return groups["a"].Consuming() == 3 && groups["b"].Consuming() == 3
	})
	a, b := groups["a"].Owned(), groups["b"].Owned()
	if len(a) != 3 || len(b) != 3 || slices.ContainsFunc(a, func(k int) bool { return slices.Contains(b, k) }) {
		t.Fatalf("owned: a %v, b %v", a, b)
	}
	publish(t, js, layout, 0, 600)
	testpoll.Until(t, 15*time.Second, "every record handled", func() bool { return s.count() == 600 })
	s.mu.Lock()
	for member, shards := range s.shards {
		for k := range shards {
			if !slices.Contains(groups[member].Owned(), k) {
				t.Errorf("member %s received a record of shard %d, which it does not own", member, k)
			}
		}
	}
	s.mu.Unlock()

	cancels["a"]()
	<-done["a"]
	testpoll.Until(t, 15*time.Second, "b owning all six shards", func() bool { return groups["b"].Consuming() == 6 })
	publish(t, js, layout, 600, 900)
	testpoll.Until(t, 15*time.Second, "every record handled", func() bool { return s.count() == 900 })
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, members := range s.by {
		if len(members) != 1 {
			t.Errorf("record %s handled %d times (%v)", key, len(members), members)
		}
	}
}
