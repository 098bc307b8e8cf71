package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/telemetry"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/extractor/extractorsvc"
	"github.com/recallhq/recall/services/trigger/triggersvc"
)

// TestExtractionOnClusterLosingMemoryLeader runs the trigger and two
// extractors on a three-node cluster (R3) under load, stops the leader of
// RECALL_MEMORY at a third of the load and starts it again at two thirds.
// The pipeline settles, no extraction overlaps, and the fence discards —
// results thrown away because the extraction built on a revision that was
// no longer the newest — are counted by cause and reported.
func TestExtractionOnClusterLosingMemoryLeader(t *testing.T) {
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := provision.Config{Replicas: 3, Partitions: 4, MemoryHistory: 64}
	if err := provision.Ensure(ctx, js, prov); err != nil {
		t.Fatalf("provisioning R3: %v", err)
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
	det := newOverlapDetector(llm.NewOffline(), 15*time.Millisecond)
	h.Provider = det
	stale0, concurrent0 := extractorsvc.FenceDiscards()
	// Low thresholds: many extractions per session, so consecutive
	// extractions of a session read what the previous one committed.
	h.TweakTrigger = func(c *triggersvc.Config) { c.MinTokensToInit, c.MinTokensBetweenUpdate = 200, 200 }
	h.startTrigger()
	h.startExtractor()
	h.startExtractor()

	var jss []jetstream.JetStream
	for i := 0; i < 3; i++ {
		_, j := c.Connect(t)
		jss = append(jss, j)
	}
	g := &loadGen{Tenant: tenantA, Sessions: 30, PerSession: 120, Batch: 10, Workers: 6, TextBytes: 60, Pause: 10 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx, jss) }()

	testpoll.Until(t, time.Minute, "a third of the load", func() bool { return g.Published.Load() >= int64(g.Total()/3) })
	st, err := js.Stream(ctx, "KV_"+events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := c.Index(info.Cluster.Leader)
	c.Stop(victim)
	t.Logf("stopped %s, the %s leader", info.Cluster.Leader, "KV_"+events.BucketMemory)
	testpoll.Until(t, time.Minute, "two thirds of the load", func() bool { return g.Published.Load() >= int64(2*g.Total()/3) })
	c.Start(victim)
	if err := <-done; err != nil {
		t.Fatalf("load: %v", err)
	}
	testpoll.Until(t, 90*time.Second, "the pipeline to settle", func() bool { return settled(js) })

	stale, concurrent := extractorsvc.FenceDiscards()
	stale, concurrent = stale-stale0, concurrent-concurrent0
	t.Logf("extractions: model calls %d over %d sessions, overlaps %d; fence discards %d (stale read %d, concurrent commit %d)",
		det.calls.Load(), countMap(&det.sessions), det.overlaps.Load(), stale+concurrent, stale, concurrent)
	fmt.Printf("RELIABILITY cluster-extraction: events=%d model_calls=%d overlaps=%d fence_discards=%d stale_read=%d concurrent_commit=%d\n",
		g.Total(), det.calls.Load(), det.overlaps.Load(), stale+concurrent, stale, concurrent)
	if det.overlaps.Load() > 0 {
		t.Fatalf("%d overlapping extractions (first: %s)", det.overlaps.Load(), det.First())
	}
}
