package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
)

// TestClusterNodeLoss runs the ingest load against a three-node cluster with
// R3 streams, stops the node leading shard 0 of the transcript in the
// middle, and starts it again: every acknowledged event is stored exactly
// once, publishing continues while the node is down, and the restarted
// node's replicas converge to the others.
func TestClusterNodeLoss(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	nc, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prov := provision.Config{Replicas: 3, Partitions: 4}
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatalf("provisioning R3: %v", err)
	}
	shards := prov.Layout().Streams()
	st, err := js.Stream(ctx, shards[0])
	if err != nil {
		t.Fatal(err)
	}
	if r := st.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("transcript shard stream has %d replicas", r)
	}

	// Several connections, so publishers sit on different nodes.
	var jss []jetstream.JetStream
	for i := 0; i < 3; i++ {
		_, j := c.Connect(t)
		jss = append(jss, j)
	}
	g := &loadGen{Tenant: "acme", Sessions: 24, PerSession: 60, Batch: 8, Workers: 6, TextBytes: 200, DupEvery: 7, Ordered: true}
	g.OnBatch = func(string, int) {}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, jss) }()

	// Stop shard 0's leader once a third of the load is in.
	testpoll.Until(t, 30*time.Second, "a third of the load", func() bool { return g.Published.Load() >= int64(g.Total()/3) })
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Index(info.Cluster.Leader)
	if victim < 0 {
		t.Fatalf("unknown leader %q", info.Cluster.Leader)
	}
	before := g.Published.Load()
	c.Stop(victim)
	g.Mark()
	t.Logf("stopped %s, shard 0's leader, after %d events", info.Cluster.Leader, before)

	// The pipeline continues: publishes keep being acknowledged.
	testpoll.Until(t, 30*time.Second, "publishes acknowledged with a node down", func() bool { return g.AckedAfter.Load() >= 200 })
	downAcked := g.AckedAfter.Load()
	c.Start(victim)
	t.Logf("restarted %s; %d events acknowledged while it was down", c.Name(victim), downAcked)

	if err := <-done; err != nil {
		t.Fatalf("load: %v", err)
	}

	// Catch up: the restarted replicas converge to the same state.
	var want server.StreamState
	testpoll.Until(t, 30*time.Second, "the restarted replicas to catch up", func() bool {
		var total server.StreamState
		for _, name := range shards {
			s, ok := converged(c, name)
			if !ok || !c.StreamCurrent(victim, name) {
				return false
			}
			total.Msgs += s.Msgs
			total.LastSeq += s.LastSeq
		}
		want = total
		return want.Msgs == uint64(g.Total())
	})
	vs := verifyStoredOnce(t, nc, g, false)
	t.Logf("cluster: %d events stored once (shard msgs %d, last seqs summed %d), %d duplicate acks, %d retried batches, %d publish errors, %d acked with a node down, %d sessions reordered by retried batches (%s)",
		vs.Stored, want.Msgs, want.LastSeq, g.Duplicates.Load(), g.Retries.Load(), g.Errors.Load(), downAcked, vs.Reordered, vs.FirstReorder)
	if vs.Reordered != 0 {
		t.Errorf("%d sessions stored out of order across the node loss (first: %s); client.Ordered must prevent it", vs.Reordered, vs.FirstReorder)
	}
	fmt.Printf("RELIABILITY cluster: events=%d duplicates=%d retries=%d errors=%d acked_while_down=%d reordered_sessions=%d\n",
		vs.Stored, g.Duplicates.Load(), g.Retries.Load(), g.Errors.Load(), downAcked, vs.Reordered)
}

// converged returns stream's state when every node's replica holds the
// same messages up to the same sequence (ok is false while a node is down
// or behind).
func converged(c *natstest.Cluster, stream string) (server.StreamState, bool) {
	first, ok := c.StreamState(0, stream)
	if !ok {
		return server.StreamState{}, false
	}
	for i := 1; i < c.Len(); i++ {
		s, ok := c.StreamState(i, stream)
		if !ok || s.Msgs != first.Msgs || s.LastSeq != first.LastSeq {
			return server.StreamState{}, false
		}
	}
	return first, true
}
