package provision

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// TestKeepBalancedAfterNodeRestart runs the periodic balancer alone (no
// service starts) against a three-node cluster with six R3 shard streams
// and two durables on each: it spreads the leaders of the streams and of
// each durable's consumers (every node leads at least one of each set,
// none more than ⌈6/3⌉); a node that leads some is stopped and started
// again, and leads nothing then; the balancer gives it its share back.
func TestKeepBalancedAfterNodeRestart(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	cfg := Config{Replicas: 3, Shards: 6, BalanceEvery: 300 * time.Millisecond}
	createShardsWithDurables(t, ctx, js, cfg, events.DurableTrigger, events.DurableIndexer)
	logs := runKeepBalanced(t, js, cfg, time.Second)

	sets := waitSpread(t, ctx, js, cfg, c, "the leaders spread at first")
	t.Logf("spread: %s", perNode(sets))
	victim := c.Index(sets[0][0].leader)
	c.Stop(victim)
	name := c.Name(victim)
	testpoll.Until(t, 60*time.Second, "every stream and consumer led without "+name, func() bool {
		sets, ok := readSets(ctx, js, cfg)
		return ok && !leads(sets, name)
	})
	// Counted before the start: the balancer may move a leader to the node
	// while Start still waits for it to be ready.
	movesAtReturn := logs.count("moving a")
	c.Start(victim)
	if sets, ok := readSets(ctx, js, cfg); ok {
		t.Logf("%s restarted; leaders: %s", name, perNode(sets))
	}

	sets = waitSpread(t, ctx, js, cfg, c, "the leaders spread again after "+name+" returned")
	t.Logf("spread again: %s", perNode(sets))
	if n := logs.count("moving a") - movesAtReturn; n == 0 {
		t.Errorf("the leaders spread after %s returned with no move of the balancer", name)
	}
	if n := logs.count("moving a consumer's leader"); n == 0 {
		t.Errorf("the balancer moved no consumer leader")
	}
}

// createShardsWithDurables creates cfg's shard streams and, on each, a
// durable pull consumer of every given name.
func createShardsWithDurables(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg Config, durables ...string) {
	t.Helper()
	for _, sc := range TranscriptStreams(cfg) {
		if err := ensureStream(ctx, js, sc); err != nil {
			t.Fatal(err)
		}
		for _, d := range durables {
			if _, err := js.CreateOrUpdateConsumer(ctx, sc.Name, jetstream.ConsumerConfig{Durable: d, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				t.Fatalf("creating %s on %s: %v", d, sc.Name, err)
			}
		}
	}
}

// runKeepBalanced runs KeepBalanced with leaderSettle shortened to settle
// until the test ends; its log is returned.
func runKeepBalanced(t *testing.T, js jetstream.JetStream, cfg Config, settle time.Duration) *testLog {
	t.Helper()
	saved := leaderSettle
	leaderSettle = settle
	logs := &testLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		KeepBalanced(ctx, js, cfg, slog.New(slog.NewTextHandler(logs, nil)))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		leaderSettle = saved
		t.Logf("balancer log:\n%s", logs.String())
	})
	return logs
}

// waitSpread waits until every group of every set (the shard streams, each
// durable's consumers) has a leader, every node of c leads some of each
// set and none more than ⌈len/nodes⌉ of it, and returns the sets.
func waitSpread(t *testing.T, ctx context.Context, js jetstream.JetStream, cfg Config, c *natstest.Cluster, what string) [][]groupLeader {
	t.Helper()
	var sets [][]groupLeader
	testpoll.Until(t, 90*time.Second, what, func() bool {
		var ok bool
		if sets, ok = readSets(ctx, js, cfg); !ok {
			return false
		}
		for _, set := range sets {
			per := leadersPer(set)
			if per[""] > 0 {
				return false
			}
			for i := range c.Len() {
				if n := per[c.Name(i)]; n < 1 || n > (len(set)+c.Len()-1)/c.Len() {
					return false
				}
			}
		}
		return true
	})
	return sets
}

// readSets reads the shard streams' leaders and their durables' (the
// streams first); ok is false when a read failed or a set is empty.
func readSets(ctx context.Context, js jetstream.JetStream, cfg Config) (sets [][]groupLeader, ok bool) {
	streams, err := readLeaders(ctx, js, cfg.Layout().Streams())
	if err != nil {
		return nil, false
	}
	consumers, err := readConsumerLeaders(ctx, js, cfg.Layout().Streams())
	if err != nil || len(consumers) == 0 {
		return nil, false
	}
	return append([][]groupLeader{streams}, consumers...), true
}

// leads reports whether node leads a group of sets, or a group has no
// leader.
func leads(sets [][]groupLeader, node string) bool {
	for _, set := range sets {
		for _, g := range set {
			if g.leader == node || g.leader == "" {
				return true
			}
		}
	}
	return false
}

// leadersPer counts the groups of set each server leads.
func leadersPer(set []groupLeader) map[string]int {
	per := map[string]int{}
	for _, g := range set {
		per[g.leader]++
	}
	return per
}

// perNode shows the leaders per node of every set.
func perNode(sets [][]groupLeader) string {
	var b strings.Builder
	for _, set := range sets {
		name := "streams"
		if set[0].consumer != "" {
			name = set[0].consumer
		}
		fmt.Fprintf(&b, "%s %v; ", name, leadersPer(set))
	}
	return b.String()
}

// testLog is a log written by the balancer's goroutine and read by the
// test's.
type testLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count is the number of lines that contain s.
func (l *testLog) count(s string) int { return strings.Count(l.String(), s) }

func TestKeepBalancedReturnsWhenOff(t *testing.T) {
	for _, cfg := range []Config{{Replicas: 1}, {Replicas: 3, BalanceEvery: -1}} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			KeepBalanced(context.Background(), nil, cfg, slog.Default())
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("KeepBalanced with %+v did not return at once", cfg)
		}
	}
}

func TestJittered(t *testing.T) {
	for range 1000 {
		if d := jittered(time.Minute); d < 48*time.Second || d >= 72*time.Second {
			t.Fatalf("jittered(1m) = %v, want within [48s, 72s)", d)
		}
	}
}
