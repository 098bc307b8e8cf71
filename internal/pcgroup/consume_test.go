package pcgroup

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

// In Consume mode the group hands every owned partition's consumer (with
// the caller's configuration) to Consume, cancels it when the partition
// moves, and a partition's messages all reach whoever owns it.
func TestGroupConsumeMode(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PCS", Subjects: []string{"pcs.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CMEMBERS", LimitMarkerTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	running := map[string]int{} // member -> Consume calls running
	start := func(id string) (*Group, context.CancelFunc, chan struct{}) {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		mjs, _ := jetstream.New(nc)
		g, err := New(mjs, Config{
			Stream: "PCS", Partitions: 4, Durable: func(p int) string { return fmt.Sprintf("pcs-%d", p) },
			PriorityGroup: "g", Bucket: "CMEMBERS", Member: id, HeartbeatTTL: time.Second, AckWait: 2 * time.Second,
			Consumer: func(p int) jetstream.ConsumerConfig {
				return jetstream.ConsumerConfig{Durable: fmt.Sprintf("pcs-%d", p), FilterSubject: fmt.Sprintf("pcs.%d.>", p),
					AckPolicy: jetstream.AckAllPolicy, PriorityPolicy: jetstream.PriorityPolicyPinned, PriorityGroups: []string{"g"}, PinnedTTL: time.Second}
			},
			Consume: func(ctx context.Context, p int, cons jetstream.Consumer) error {
				mu.Lock()
				running[id]++
				mu.Unlock()
				defer func() { mu.Lock(); running[id]--; mu.Unlock() }()
				it, err := cons.Messages(jetstream.PullPriorityGroup("g"))
				if err != nil {
					return err
				}
				go func() { <-ctx.Done(); it.Stop() }()
				for {
					m, err := it.Next()
					if err != nil {
						return nil
					}
					mu.Lock()
					seen[string(m.Data())] = true
					mu.Unlock()
					_ = m.Ack()
				}
			},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		gctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = g.Run(gctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return g, cancel, done
	}
	a, _, _ := start("a")
	b, stopB, doneB := start("b")
	// Settled: both members see each other, own four partitions between
	// them, and consume exactly what they own (a partition a gives up stops
	// being consumed there first). A message published before that could
	// be buffered by a member that then hands its partition over unread.
	testpoll.Until(t, 15*time.Second, "two members sharing four partitions", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(a.Members()) == 2 && len(b.Members()) == 2 && len(a.Owned())+len(b.Owned()) == 4 &&
			running["a"] == len(a.Owned()) && running["b"] == len(b.Owned())
	})
	publishN := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, fmt.Sprintf("pcs.%d.x", i%4), []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	publishN(0, 100)
	// Every message handled before b stops: messages delivered to a
	// stopping member and not handled are the Consume function's to
	// recover (with AckAll the next owner's first ack covers them; the
	// trigger's lanes detect the delivery gap and read them back), not the
	// group's, and this Consume does not.
	testpoll.Until(t, 15*time.Second, "the first messages consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 100
	})
	stopB()
	<-doneB
	testpoll.Until(t, 15*time.Second, "one member with every partition", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(a.Owned()) == 4 && running["a"] == 4 && running["b"] == 0
	})

	publishN(100, 200)
	testpoll.Until(t, 15*time.Second, "every message consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 200
	})

}

// With Settle, members started together take their partitions once: no
// partition is acquired by one member and handed to another at start.
// Without it, the first member to sync takes partitions it soon releases.
func TestGroupSettleAvoidsStartupHandOffs(t *testing.T) {
	for _, settle := range []time.Duration{0, 700 * time.Millisecond} {
		t.Run(fmt.Sprintf("settle %v", settle), func(t *testing.T) {
			s := natstest.Start(t)
			_, js := s.Connect(t)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PCS", Subjects: []string{"pcs.>"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "SMEMBERS", LimitMarkerTTL: time.Second}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			starts := 0
			var groups []*Group
			for i := range 3 {
				nc, err := nats.Connect(s.ClientURL())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(nc.Close)
				mjs, _ := jetstream.New(nc)
				g, err := New(mjs, Config{
					Stream: "PCS", Partitions: 6, Durable: func(p int) string { return fmt.Sprintf("pcs-%d", p) },
					Filter: func(p int) string { return fmt.Sprintf("pcs.%d.>", p) }, PriorityGroup: "g", Bucket: "SMEMBERS",
					Member: fmt.Sprintf("m%d", i), HeartbeatTTL: 2 * time.Second, Settle: settle,
					Consume: func(ctx context.Context, p int, cons jetstream.Consumer) error {
						mu.Lock()
						starts++
						mu.Unlock()
						<-ctx.Done()
						return nil
					},
				}, nil)
				if err != nil {
					t.Fatal(err)
				}
				groups = append(groups, g)
				gctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { _ = g.Run(gctx); close(done) }()
				t.Cleanup(func() { cancel(); <-done })
				time.Sleep(50 * time.Millisecond) // a rollout: members a moment apart
			}
			testpoll.Until(t, 15*time.Second, "three members with two partitions each", func() bool {
				for _, g := range groups {
					if len(g.Owned()) != 2 || len(g.Members()) != 3 {
						return false
					}
				}
				return true
			})
			heartbeatRound(t, js, "SMEMBERS", groups) // any late hand-off shows by then
			mu.Lock()
			defer mu.Unlock()
			t.Logf("partition starts: %d for 6 partitions", starts)
			if settle > 0 && starts != 6 {
				t.Fatalf("with Settle, %d partition starts for 6 partitions (hand-offs at start)", starts)
			}
		})
	}
}

// heartbeatRound waits until every member of groups renewed its membership
// key in bucket once more: each member reconciles its partitions on the
// others' beats, so a change they would make has had its chance.
func heartbeatRound(t *testing.T, js jetstream.JetStream, bucket string, groups []*Group) {
	t.Helper()
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	beats := map[string]uint64{}
	for _, g := range groups {
		e, err := kv.Get(ctx, g.Member())
		if err != nil {
			t.Fatal(err)
		}
		beats[g.Member()] = e.Revision()
	}
	testpoll.Until(t, 10*time.Second, "a heartbeat of every member", func() bool {
		for m, rev := range beats {
			if e, err := kv.Get(ctx, m); err != nil || e.Revision() <= rev {
				return false
			}
		}
		return true
	})
}
