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

// ackFloor is the trigger consumer's ack floor (stream sequence).
func ackFloor(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, events.StreamTranscript, events.DurableTrigger)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.AckFloor.Stream
}

// While RECALL_EXTRACT cannot store decisions, the trigger acknowledges
// nothing past the first record whose decision is not stored, stops within
// the bound, and a later trigger emits every decision once the stream is
// back.
func TestDecisionStoreOutage(t *testing.T) {
	_, nc, js := setup(t)
	c := collect(t, nc)
	items := generate(11, 120)
	cfg := testConfig()
	cfg.AckWait = 2 * time.Second // records read at start are acked at their redelivery
	want := expected0(t, nc, js, items, cfg)
	first := firstDecision(want)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, events.StreamExtract); err != nil {
		t.Fatal(err)
	}
	tr, stop := startTrigger(t, nc, cfg, nil)
	testpoll.Until(t, 10*time.Second, "the first decision attempted", func() bool { return tr.Stats().Records >= int64(first) })
	// Give the trigger time to (wrongly) acknowledge.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if f := ackFloor(t, js); f >= first {
			t.Fatalf("ack floor %d reached the record %d whose decision is not stored", f, first)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := tr.Stats().Records; n >= int64(len(items)) {
		t.Fatalf("the trigger processed all %d records during the outage: it should stop taking work", n)
	}
	start := time.Now()
	stop()
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("shutdown during the outage took %v", d)
	} else {
		t.Logf("shutdown during the outage took %v", d)
	}
	if f := ackFloor(t, js); f >= first {
		t.Fatalf("ack floor %d after shutdown passed the unstored decision at %d", f, first)
	}

	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	startTrigger(t, nc, cfg, nil)
	waitAcked(t, js, lastSeq(t, js), 30*time.Second)
	c.check(want)
}

// The same trigger resumes by itself when the stream comes back.
func TestDecisionStoreOutageResumes(t *testing.T) {
	_, nc, js := setup(t)
	c := collect(t, nc)
	items := generate(12, 80)
	cfg := testConfig()
	want := expected0(t, nc, js, items, cfg)
	first := firstDecision(want)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, events.StreamExtract); err != nil {
		t.Fatal(err)
	}
	tr, _ := startTrigger(t, nc, cfg, nil)
	testpoll.Until(t, 10*time.Second, "the first decision attempted", func() bool { return tr.Stats().Records >= int64(first) })
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, js, lastSeq(t, js), 30*time.Second)
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
	waitAcked(t, js, lastSeq(t, js), 30*time.Second)
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

func firstDecision(want map[string]events.ExtractionRequested) uint64 {
	first := ^uint64(0)
	for _, r := range want {
		first = min(first, r.UpToSeq)
	}
	return first
}
