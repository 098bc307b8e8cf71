package longtermsvc

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/eventtest"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// queued are the commit requests waiting on RECALL_COMMITS, in order.
func (f *fixture) queued(t *testing.T) []events.CommitQueued {
	t.Helper()
	ctx := context.Background()
	st, err := f.js.Stream(ctx, events.StreamCommits)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.CommitQueued
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted (settled)
		}
		if userKey(m.Subject) != "acme.u1" {
			t.Fatalf("request on %s, want user u1 of acme", m.Subject)
		}
		var q events.CommitQueued
		_ = json.Unmarshal(m.Data, &q) // an unreadable request counts, zero
		out = append(out, q)
	}
	return out
}

// follow hands every stored record of tenant acme's sessions to the
// transcript consumer's handler, as its shard group does, each twice (as
// a redelivery would), and returns the consumers it read with.
func (f *fixture) follow(t *testing.T, sessions ...string) []jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k := &consumer{c: f.c, js: f.js}
	var conss []jetstream.Consumer
	for _, s := range sessions {
		layout := f.c.reader.Layout()
		cons, err := f.js.CreateConsumer(ctx, layout.Stream("acme", s), jetstream.ConsumerConfig{
			FilterSubject: layout.Subject("acme", s), AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := cons.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			k.handle(ctx, m)
			k.handle(ctx, m) // handled again, as a redelivery is
		}
		conss = append(conss, cons)
	}
	return conss
}

// TestCommitPointsQueuedOnceByUser: the transcript consumer queues one
// commit request per commit point — a reported compaction, the session's
// end — for the session's user, up to that record, once even when the
// record is handled again; other records and a session without a user
// queue nothing; every record is acknowledged.
func TestCommitPointsQueuedOnceByUser(t *testing.T) {
	f := newFixture(t, Config{})
	f.start(t, "u1", nil)
	f.say(t, "", "I prefer tabs.")
	compacted := f.add(t, f.s.Compacted(f.id(), events.SessionCompacted{Trigger: "auto"}))
	f.say(t, "", "And dark mode.")
	ended := f.end(t)
	anon := eventtest.NewSession("acme", "s2") // no session.started: no user
	f.add(t, anon.User("1", "hi"), anon.Ended("2"))
	conss := f.follow(t, "s1", "s2")
	want := []events.CommitQueued{
		{Session: "s1", Reason: events.CommitReasonCompaction, UpTo: compacted},
		{Session: "s1", Reason: events.CommitReasonSessionEnded, UpTo: ended},
	}
	if got := f.queued(t); !slices.Equal(got, want) {
		t.Fatalf("queued %+v, want %+v", got, want)
	}
	for _, cons := range conss {
		info, err := cons.Info(context.Background())
		if err != nil || info.NumAckPending != 0 || info.Delivered.Stream == 0 {
			t.Fatalf("records left unacknowledged: %+v, %v", info, err)
		}
	}
}

// runGroup runs the fixture's committer in the commit group until the
// test ends.
func (f *fixture) runGroup(t *testing.T) {
	t.Helper()
	group, err := f.c.newGroup(f.js)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = group.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testpoll.Until(t, 10*time.Second, "the commit group's partitions owned", func() bool { return len(group.Owned()) == testProvision.Partitions })
}

// TestFailingCommitRetriedWithBackoffThenParked: a queued commit whose
// model keeps failing is tried again after RetryBackoff, doubling, and on
// its MaxAttempts-th try parked and removed from the queue, its batch left
// uncommitted; a replay once the model recovers commits it.
func TestFailingCommitRetriedWithBackoffThenParked(t *testing.T) {
	const backoff = 100 * time.Millisecond
	f := newFixture(t, Config{MaxAttempts: 3, RetryBackoff: backoff, HeartbeatTTL: 2 * time.Second})
	f.model.setPlan(func(llm.Request) []llm.ToolCall {
		return []llm.ToolCall{write("w", "preferences", "- Prefers tabs.", "")}
	})
	f.model.setFailing(-1)
	f.start(t, "u1", nil)
	f.say(t, "", "I prefer tabs.")
	ended := f.end(t)
	f.runGroup(t)
	ctx := context.Background()
	if err := f.c.enqueue(ctx, f.js, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded, upTo: ended}); err != nil {
		t.Fatal(err)
	}
	var list []parked.Commit
	testpoll.Until(t, 20*time.Second, "the failing commit parked", func() bool {
		list, _ = parked.ListCommits(ctx, f.js)
		return len(list) > 0
	})
	p := list[0]
	if len(list) != 1 || p.Tenant != "acme" || p.User != "u1" || p.Session != "s1" || p.UpTo != ended || p.Attempts != 3 || !strings.Contains(p.Error, "529") {
		t.Fatalf("parked %+v", list)
	}
	at := f.model.times()
	if len(at) != 3 || at[1].Sub(at[0]) < backoff || at[2].Sub(at[1]) < 2*backoff {
		t.Fatalf("model calls at %v: want 3 tries, %v then %v apart", at, backoff, 2*backoff)
	}
	testpoll.Until(t, 5*time.Second, "the parked request removed from the queue", func() bool { return len(f.queued(t)) == 0 })
	if rec, docs := f.record(t), f.docs(t, "acme", "u1"); rec.LastSeq != 0 || len(docs) != 0 {
		t.Fatalf("a failed commit advanced the record (%+v) or wrote %v", rec, docs)
	}
	f.model.setFailing(0)
	if n, err := parked.ReplayCommits(ctx, f.js, parked.Filter{Session: "s1"}); err != nil || n != 1 {
		t.Fatalf("replayed %d, %v", n, err)
	}
	testpoll.Until(t, 10*time.Second, "the replayed commit done", func() bool { return f.record(t).LastSeq == ended })
	if docs := f.docs(t, "acme", "u1"); !strings.Contains(docs["self/preferences"], "tabs") {
		t.Fatalf("documents after the replay: %v", docs)
	}
	if list, err := parked.ListCommits(ctx, f.js); err != nil || len(list) != 0 {
		t.Fatalf("still parked after the replay: %+v, %v", list, err)
	}
}

// TestPermanentOutcomesSettleAtOnce: requests another try cannot change —
// a refused policy, a session without a user, an unreadable request — are
// settled on their first delivery: not retried, not parked, no model call.
func TestPermanentOutcomesSettleAtOnce(t *testing.T) {
	f := newFixture(t, Config{MaxAttempts: 2, RetryBackoff: 50 * time.Millisecond, HeartbeatTTL: 2 * time.Second})
	f.model.setFailing(-1) // a model call would fail: the test sees it
	f.start(t, "u1", policyOf(true, false, "no_such_type"))
	f.say(t, "", "I prefer tabs.")
	ended := f.end(t)
	ctx := context.Background()
	if err := f.c.enqueue(ctx, f.js, commitJob{tenant: "acme", session: "s1", reason: events.CommitReasonSessionEnded, upTo: ended}); err != nil {
		t.Fatal(err)
	}
	noUser, _ := json.Marshal(events.CommitQueued{Session: "s9", Reason: events.CommitReasonSessionEnded, UpTo: 1})
	for _, body := range [][]byte{noUser, []byte(`{"session":`)} {
		if _, err := f.js.Publish(ctx, events.CommitSubject("acme", "u1"), body); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.queued(t)); n != 3 {
		t.Fatalf("%d requests queued, want 3", n)
	}
	f.runGroup(t)
	testpoll.Until(t, 10*time.Second, "every request settled", func() bool { return len(f.queued(t)) == 0 })
	if list, err := parked.ListCommits(ctx, f.js); err != nil || len(list) != 0 {
		t.Fatalf("parked %+v, %v", list, err)
	}
	if n := len(f.model.requests()); n != 0 {
		t.Fatalf("%d model calls for requests that cannot commit", n)
	}
}
