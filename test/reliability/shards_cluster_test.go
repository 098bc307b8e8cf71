package reliability

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// TestShardsOnCluster runs the sharded transcript on a three-node cluster
// (six R3 shard streams) with two trigger replicas sharing the shards:
//   - after balancing, the shard streams' leaders are spread over the nodes
//     (two each);
//   - the load is published through pkg/client (which discovers the
//     layout) over many sessions; a node leading shards is stopped at a
//     third of it: only the shards it led change leader, the others keep
//     theirs, and publishing goes on;
//   - the node comes back and its replicas catch up; every published event
//     is stored exactly once, in its session's order; the triggers consume
//     every record of every shard, and their decisions are stored once
//     each, in order; balancing again gives the returning node its share.
func TestShardsOnCluster(t *testing.T) {
	start := time.Now()
	at := func() time.Duration { return time.Since(start).Round(time.Millisecond) }
	c := natstest.StartCluster(t, 3)
	nc, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prov := provision.Config{Replicas: 3, Partitions: 4, Shards: 6, MemoryHistory: 64}
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatalf("provisioning R3: %v", err)
	}
	before := balancedLeaders(t, ctx, c, js, prov)
	t.Logf("%v: leaders after balancing: %v (per node %v)", at(), before, leadersPerNode(before))
	if per := leadersPerNode(before); len(per) < 2 {
		t.Fatalf("shard leaders on %d node(s) after balancing: %v", len(per), per)
	}

	logs := &logSink{}
	h := &harness{t: t, logs: logs, prov: prov, natsCfg: natsconn.Config{URL: c.URLs()},
		log: telemetry.NewLogger(logs, telemetry.Config{LogLevel: "debug", LogFormat: "json"})}
	t.Cleanup(func() {
		h.stopAll()
		if t.Failed() {
			t.Logf("last log lines:\n%s", logs.tail(40))
		}
	})
	h.startTrigger()
	h.startTrigger()

	var jss []jetstream.JetStream
	for range 3 {
		_, j := c.Connect(t)
		jss = append(jss, j)
	}
	g := &loadGen{Tenant: tenantA, Sessions: 36, PerSession: 72, Batch: 8, Workers: 6, TextBytes: 200, DupEvery: 7, Ordered: true}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, jss) }()

	testpoll.Until(t, 30*time.Second, "a third of the load", func() bool { return g.Published.Load() >= int64(g.Total()/3) })
	victim := c.Index(before[events.TranscriptShardStream(0)])
	c.Stop(victim)
	g.Mark()
	after := checkOnlyVictimsLeadersMove(t, ctx, js, prov, before, c.Name(victim))
	t.Logf("%v: stopped %s; leaders now %v", at(), c.Name(victim), after)

	testpoll.Until(t, 30*time.Second, "publishes acknowledged with a node down", func() bool { return g.AckedAfter.Load() >= 200 })
	downAcked := g.AckedAfter.Load()
	c.Start(victim)
	if err := <-done; err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Logf("%v: %s restarted, the load published (%d acknowledged while it was down)", at(), c.Name(victim), downAcked)
	waitShardsCaughtUp(t, c, prov, victim, uint64(g.Total()))
	vs := verifyStoredOnce(t, nc, g, false)
	if vs.Reordered != 0 {
		t.Errorf("%d sessions stored out of order across the node loss (first: %s)", vs.Reordered, vs.FirstReorder)
	}
	t.Logf("%v: replicas caught up, %d events stored once", at(), vs.Stored)
	testpoll.Until(t, 30*time.Second, "the triggers to consume every record", func() bool { return triggerConsumedAll(ctx, js, prov) })
	t.Logf("%v: the triggers consumed every record", at())
	decisions := checkDecisionsOnce(t, ctx, c, nc)

	back := balancedLeaders(t, ctx, c, js, prov)
	t.Logf("%v: leaders after %s returned and balancing: per node %v", at(), c.Name(victim), leadersPerNode(back))
	if per := leadersPerNode(back); per[c.Name(victim)] == 0 {
		t.Errorf("the returning node %s leads no shard after balancing: %v", c.Name(victim), per)
	}
	fmt.Printf("RELIABILITY shards-cluster: shards=%d events=%d stored=%d duplicates=%d retries=%d acked_while_down=%d reordered_sessions=%d decisions=%d leaders_before=%v leaders_after_return=%v\n",
		prov.Shards, g.Total(), vs.Stored, g.Duplicates.Load(), g.Retries.Load(), downAcked, vs.Reordered, decisions,
		leadersPerNode(before), leadersPerNode(back))
}

// waitShardsCaughtUp waits until every node holds the same copy of every
// shard stream, node victim's current, total records in all.
func waitShardsCaughtUp(t *testing.T, c *natstest.Cluster, prov provision.Config, victim int, total uint64) {
	t.Helper()
	testpoll.Until(t, 30*time.Second, c.Name(victim)+"'s replicas to catch up", func() bool {
		var msgs uint64
		for _, name := range prov.Layout().Streams() {
			s, ok := converged(c, name)
			if !ok || !c.StreamCurrent(victim, name) {
				return false
			}
			msgs += s.Msgs
		}
		return msgs == total
	})
}

// balancedLeaders balances the shard streams' leaders until no node leads
// more than one shard more than another, and returns them. The balancer
// leaves a layout alone for a while after a leader changed
// (provision.ErrUnsettled): a node loss or its own moves.
func balancedLeaders(t *testing.T, ctx context.Context, c *natstest.Cluster, js jetstream.JetStream, prov provision.Config) map[string]string {
	t.Helper()
	var leaders map[string]string
	testpoll.Until(t, 40*time.Second, "the shard leaders balanced", func() bool {
		_, err := provision.BalanceLeaders(ctx, js, prov)
		if err != nil && !errors.Is(err, provision.ErrLeaderless) && !errors.Is(err, provision.ErrUnsettled) {
			t.Logf("balancing: %v", err)
		}
		l, err := provision.ShardLeaders(ctx, js, prov)
		if err != nil {
			return false
		}
		leaders = l
		per := leadersPerNode(l)
		lo, hi := len(l), 0
		for i := range c.Len() {
			lo, hi = min(lo, per[c.Name(i)]), max(hi, per[c.Name(i)])
		}
		return per[""] == 0 && hi-lo <= 1
	})
	return leaders
}

// leadersPerNode counts the streams each server leads.
func leadersPerNode(leaders map[string]string) map[string]int {
	per := map[string]int{}
	for _, l := range leaders {
		per[l]++
	}
	return per
}

// checkOnlyVictimsLeadersMove waits until every shard stream has a leader
// again after victim stopped, and checks that exactly the streams victim
// led have a new leader.
func checkOnlyVictimsLeadersMove(t *testing.T, ctx context.Context, js jetstream.JetStream, prov provision.Config, before map[string]string, victim string) map[string]string {
	t.Helper()
	var after map[string]string
	testpoll.Until(t, 30*time.Second, "a leader for every shard without "+victim, func() bool {
		l, err := provision.ShardLeaders(ctx, js, prov)
		if err != nil {
			t.Logf("reading the shard leaders: %v", err)
			return false
		}
		for _, name := range l {
			if name == "" || name == victim {
				return false
			}
		}
		after = l
		return true
	})
	for _, s := range slices.Sorted(maps.Keys(before)) {
		switch {
		case before[s] == victim && after[s] == victim:
			t.Errorf("%s still led by the stopped %s", s, victim)
		case before[s] != victim && after[s] != before[s]:
			t.Errorf("%s was led by %s, which kept running, and moved to %s", s, before[s], after[s])
		}
	}
	return after
}

// triggerConsumedAll reports whether the trigger's consumer on every shard
// stream has acknowledged the stream's last record.
func triggerConsumedAll(ctx context.Context, js jetstream.JetStream, prov provision.Config) bool {
	// A request a stream leader never answers must not hold the poll.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, name := range prov.Layout().Streams() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return false
		}
		cons, err := st.Consumer(ctx, events.DurableTrigger)
		if err != nil {
			return false
		}
		ci, err := cons.Info(ctx)
		if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 || ci.AckFloor.Stream < st.CachedInfo().State.LastSeq {
			return false
		}
	}
	return true
}

// checkDecisionsOnce reads the trigger's decisions (the extraction requests
// in RECALL_EVENTS, once every replica of it holds the same) and checks that
// each is stored once and a session's are stored in order; it returns their
// number.
func checkDecisionsOnce(t *testing.T, ctx context.Context, c *natstest.Cluster, nc *nats.Conn) int {
	t.Helper()
	testpoll.Until(t, 30*time.Second, "the replicas of "+events.StreamEvents+" to converge", func() bool {
		_, ok := converged(c, events.StreamEvents)
		return ok
	})
	last := map[string]uint64{}
	n := 0
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := transcript.ScanRaw(ctx, nc, events.StreamEvents, events.EventsSubject(events.KindExtractionRequested, tenantA, "*"), 0, 0, 0, func(m transcript.Raw) bool {
		e, err := natsce.Decode(m.Header, m.Data)
		var req events.ExtractionRequested
		if err == nil {
			err = e.DataAs(&req)
		}
		if err != nil {
			t.Errorf("decoding the decision at %d: %v", m.Seq, err)
			return false
		}
		if req.UpToSeq <= last[req.Session] {
			t.Errorf("session %s: decision up to %d stored after one up to %d (a duplicate or out of order)", req.Session, req.UpToSeq, last[req.Session])
		}
		last[req.Session] = req.UpToSeq
		n++
		return true
	})
	if err != nil {
		t.Fatalf("reading the decisions: %v", err)
	}
	if n == 0 {
		t.Errorf("the triggers made no decision; the test checks nothing about them")
	}
	t.Logf("%d decisions over %d sessions, each stored once", n, len(last))
	return n
}
