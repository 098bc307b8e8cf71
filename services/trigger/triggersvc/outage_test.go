package triggersvc

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// While RECALL_EXTRACT cannot store decisions, the trigger acknowledges
// nothing past the first record whose decision is not stored (in every
// shard), stops taking that shard's work, stops within the bound, and a
// later trigger emits every decision once the stream is back.
func TestDecisionStoreOutage(t *testing.T) {
	_, nc, js := setup(t)
	c := collect(t, nc)
	items := generate(11, 120)
	cfg := testConfig()
	cfg.AckWait = 2 * time.Second // records read at start are acked at their redelivery
	want := expected0(t, nc, js, items, cfg)
	first := firstDecisions(t, js, want)
	stored := lastSeqs(t, js)
	// A shard's lane stops at its first flush after its first decision:
	// within AckEvery records.
	var bound uint64
	for k, f := range first {
		if f == 0 {
			bound += stored[k]
		} else {
			bound += min(stored[k], f+uint64(cfg.AckEvery))
		}
	}
	if bound >= stored.total() {
		t.Fatalf("first decisions %v of shards holding %v: every shard decides too late for the outage to show", first, stored)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, events.StreamExtract); err != nil {
		t.Fatal(err)
	}
	tr, stop := startTrigger(t, nc, cfg, nil)
	testpoll.Until(t, 10*time.Second, "the first decisions delivered", func() bool { return delivered(t, js).covers(first) })
	// Give the trigger time to (wrongly) acknowledge.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		checkBelow(t, ackFloors(t, js), first, "during the outage")
		time.Sleep(50 * time.Millisecond)
	}
	if n := tr.Stats().Records; n > int64(bound) {
		t.Fatalf("the trigger processed %d records during the outage, at most %d expected: it should stop taking a shard's work", n, bound)
	}
	start := time.Now()
	stop()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown during the outage took %v", d)
	} else {
		t.Logf("shutdown during the outage took %v", d)
	}
	checkBelow(t, ackFloors(t, js), first, "after shutdown")

	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	startTrigger(t, nc, cfg, nil)
	waitAllAcked(t, js, 30*time.Second)
	c.check(want)
}

// firstDecisions is, per shard, the sequence of its first decision (0 for
// a shard without one).
func firstDecisions(t *testing.T, js jetstream.JetStream, want map[string]events.ExtractionRequested) shardSeqs {
	layout := serverLayout(t, js)
	out := make(shardSeqs, layout.Shards())
	for _, r := range want {
		k := layout.Shard(r.Tenant, r.Session)
		if out[k] == 0 || r.UpToSeq < out[k] {
			out[k] = r.UpToSeq
		}
	}
	return out
}

// delivered returns the newest stream sequence the trigger's durable on
// every shard delivered.
func delivered(t *testing.T, js jetstream.JetStream) shardSeqs {
	t.Helper()
	layout := serverLayout(t, js)
	out := make(shardSeqs, layout.Shards())
	for k, name := range layout.Streams() {
		c, err := js.Consumer(context.Background(), name, events.DurableTrigger)
		if err != nil {
			continue
		}
		if info, err := c.Info(context.Background()); err == nil {
			out[k] = info.Delivered.Stream
		}
	}
	return out
}

// covers reports whether s reaches want in every shard.
func (s shardSeqs) covers(want shardSeqs) bool {
	for k, w := range want {
		if s[k] < w {
			return false
		}
	}
	return true
}

// checkBelow fails when a shard's ack floor reached its first unstored
// decision.
func checkBelow(t *testing.T, floors, first shardSeqs, when string) {
	t.Helper()
	for k, f := range first {
		if f > 0 && floors[k] >= f {
			t.Fatalf("%s: shard %d's ack floor %d reached the record %d whose decision is not stored", when, k, floors[k], f)
		}
	}
}

// The same trigger resumes by itself when the stream comes back.
func TestDecisionStoreOutageResumes(t *testing.T) {
	_, nc, js := setup(t)
	c := collect(t, nc)
	items := generate(12, 80)
	cfg := testConfig()
	want := expected0(t, nc, js, items, cfg)
	first := firstDecisions(t, js, want)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, events.StreamExtract); err != nil {
		t.Fatal(err)
	}
	tr, _ := startTrigger(t, nc, cfg, nil)
	testpoll.Until(t, 10*time.Second, "the first decisions delivered", func() bool { return delivered(t, js).covers(first) })
	if n := tr.Stats().Decisions; n == 0 {
		t.Fatal("no decision attempted during the outage")
	}
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	waitAllAcked(t, js, 30*time.Second)
	c.check(want)
}

// Shutdown is bounded while the NATS server is down.
func TestShutdownDuringServerOutage(t *testing.T) {
	s, nc, js := setup(t)
	c := collect(t, nc)
	items := generate(13, 80)
	cfg := testConfig()
	// Records delivered to the first trigger before the outage are read
	// by Direct Get at the restart and acknowledged at their redelivery:
	// after AckWait (the default 30 s made this test take 30 s half the
	// time).
	cfg.AckWait = 2 * time.Second
	want := expected0(t, nc, js, items, cfg)
	tr, stop := startTrigger(t, nc, cfg, nil)
	testpoll.Until(t, 10*time.Second, "some records", func() bool { return tr.Stats().Records > 0 })
	o := *s.Opts
	o.Port = s.Addr().(*net.TCPAddr).Port
	s.Shutdown()
	s.WaitForShutdown()
	start := time.Now()
	stop()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown during a server outage took %v", d)
	} else {
		t.Logf("shutdown during a server outage took %v", d)
	}
	natstest.StartWith(t, &o)
	startTrigger(t, nc, cfg, nil)
	waitAllAcked(t, js, 30*time.Second)
	c.check(want)
}

// expected0 publishes items and returns the straight-through decisions.
func expected0(t *testing.T, nc *nats.Conn, js jetstream.JetStream, items []item, cfg Config) map[string]events.ExtractionRequested {
	t.Helper()
	publish(t, js, items)
	want := expected(t, nc, items, cfg.Thresholds())
	if len(want) < 3 {
		t.Fatalf("only %d expected decisions", len(want))
	}
	return want
}
