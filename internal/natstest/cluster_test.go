package natstest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
)

// TestClusterStopAndRestart stops the leader of an R3 stream, publishes
// while it is down, and starts it again with its store: the stream gets a
// new leader, and the restarted replica catches up.
func TestClusterStopAndRestart(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	if c.MetaLeader() < 0 {
		t.Fatal("no meta leader after StartCluster")
	}
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := js.Publish(ctx, "s.x", []byte(fmt.Sprint(i))); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	publish(0, 10)
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Index(info.Cluster.Leader)
	if victim < 0 {
		t.Fatalf("leader %q is not a node of the kit", info.Cluster.Leader)
	}
	c.Stop(victim)
	if c.Node(victim) != nil || len(c.Running()) != 2 {
		t.Fatalf("node %s still listed as running", c.Name(victim))
	}
	publish(10, 20) // the two others elect a leader; the publisher retries within ctx
	testpoll.Until(t, 10*time.Second, "a new leader", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.Cluster.Leader != "" && info.Cluster.Leader != c.Name(victim)
	})
	c.Start(victim)
	testpoll.Until(t, 20*time.Second, "the restarted replica to catch up", func() bool {
		state, ok := c.StreamState(victim, "S")
		return ok && state.Msgs == 20 && c.StreamCurrent(victim, "S")
	})
}
