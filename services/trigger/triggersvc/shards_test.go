package triggersvc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// SessionPartition is the server's partition(n,1,2) transform: the
// extraction stream stores a session's requests under the same number.
func TestSessionPartitionMatchesServer(t *testing.T) {
	_, _, js := setup(t) // RECALL_EXTRACT has 4 partitions
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 40 {
		tenant, session := fmt.Sprintf("t%d", i%3), fmt.Sprintf("session-%d", i)
		ack, err := js.Publish(ctx, events.ExtractSubject(tenant, session), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := js.Stream(ctx, events.StreamExtract)
		m, err := s.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("%s.%d.%s.%s", events.SubjectExtractPartitioned, events.SessionPartition(tenant, session, 4), tenant, session)
		if m.Subject != want {
			t.Fatalf("stored on %s, SessionPartition says %s", m.Subject, want)
		}
	}
}

// replica is one trigger replica of a test, on its own connection.
type replica struct {
	tr   *Trigger
	stop func()
	nc   *nats.Conn
}

// startReplica runs a trigger replica named id on a new connection.
func startReplica(t *testing.T, s *natstest.Server, cfg Config, id string) replica {
	t.Helper()
	nc, _ := s.Connect(t)
	cfg.MemberID = id
	tr, stop := startTrigger(t, nc, cfg, nil)
	return replica{tr, stop, nc}
}

// waitLanes waits until each replica follows exactly each shards. With
// S shards over R replicas seeing each other, the group gives every
// replica S/R of them (at most ⌈S/R⌉): equal counts mean the assignment
// settled.
func waitLanes(t *testing.T, d time.Duration, each int, rs ...replica) {
	t.Helper()
	testpoll.Until(t, d, fmt.Sprintf("%d replicas following %d shards each", len(rs), each), func() bool {
		for _, r := range rs {
			if r.tr.Stats().Lanes != each {
				return false
			}
		}
		return true
	})
}

// everyShardHolds fails the test when a shard holds no record: a test of
// how replicas share shards shows nothing about an empty one.
func everyShardHolds(t *testing.T, stored shardSeqs) {
	t.Helper()
	for k, n := range stored {
		if n == 0 {
			t.Fatalf("shard %d holds no record (%v): choose sessions that cover every shard", k, stored)
		}
	}
}

// Three replicas share six shards: each follows two, receives exactly the
// records of its shards (no record it would drop), and together they
// receive every record once; the decisions equal a single replica's.
func TestReplicasReadOnlyTheirShards(t *testing.T) {
	const shards, replicas = 6, 3
	s, ncc, js := setupShards(t, shards)
	c := collect(t, ncc)
	cfg := testConfig()
	cfg.Shards = shards
	var rs []replica
	for i := range replicas {
		rs = append(rs, startReplica(t, s, cfg, fmt.Sprintf("r%d", i)))
	}
	waitLanes(t, 15*time.Second, shards/replicas, rs...)
	items := manySessions(4, 60)
	publish(t, js, items)
	stored := lastSeqs(t, js)
	everyShardHolds(t, stored)
	waitAllAcked(t, js, 30*time.Second)
	c.check(expected(t, ncc, items, cfg.Thresholds()))

	var sum int64
	for i, r := range rs {
		st := r.tr.Stats()
		var mine uint64
		for _, k := range r.tr.group.Load().Owned() {
			mine += stored[k]
		}
		t.Logf("replica %d owns %v: %+v", i, r.tr.group.Load().Owned(), st)
		if st.Delivered != int64(mine) || st.Records != int64(mine) || st.GapFilled != 0 || st.Redelivered != 0 {
			t.Fatalf("replica %d: delivered %d, processed %d (gap-filled %d, redelivered %d); its shards hold %d records",
				i, st.Delivered, st.Records, st.GapFilled, st.Redelivered, mine)
		}
		sum += st.Delivered
	}
	if sum != int64(stored.total()) {
		t.Fatalf("the replicas received %d records in all, the shards hold %d", sum, stored.total())
	}
	for k, name := range serverLayout(t, js).Streams() {
		cons, err := js.Consumer(context.Background(), name, events.DurableTrigger)
		if err != nil {
			t.Fatal(err)
		}
		// A shard stream holds only its sessions: a filter would only make
		// the server search its subject tree for every delivery.
		if cc := cons.CachedInfo().Config; cc.FilterSubject != "" || len(cc.FilterSubjects) > 0 || len(cc.PriorityGroups) != 1 {
			t.Fatalf("shard %d's durable: filter %q %v, priority groups %v", k, cc.FilterSubject, cc.FilterSubjects, cc.PriorityGroups)
		}
	}
}

// Replicas leave and join while records arrive: one stops cleanly (its
// shards move at once), one dies without a clean shutdown (its shards move
// when its membership expires), one joins late. Every decision equals a
// single replica's straight-through computation (so every session's state
// was rebuilt where its shard moved), and the decisions re-emitted for
// records that were redelivered are stored once.
func TestShardHandOver(t *testing.T) {
	const shards = 6
	s, ncc, js := setupShards(t, shards)
	c := collect(t, ncc)
	items := manySessions(4, 60)
	cfg := testConfig()
	cfg.Shards = shards
	cfg.AckWait = 2 * time.Second // records read at start are acked at their redelivery
	third := len(items) / 3
	r0, r1, r2 := startReplica(t, s, cfg, "r0"), startReplica(t, s, cfg, "r1"), startReplica(t, s, cfg, "r2")
	waitLanes(t, 15*time.Second, 2, r0, r1, r2)

	publish(t, js, items[:third])
	everyShardHolds(t, lastSeqs(t, js))
	waitAllAcked(t, js, 30*time.Second)
	r0.stop() // a clean stop: its shards are unpinned and move at once
	waitLanes(t, 15*time.Second, 3, r1, r2)

	publish(t, js, items[third:2*third])
	r1.nc.Close() // r1 dies: no clean shutdown, its records may be unacknowledged
	killed := time.Now()
	// Its shards move once its membership expires (HeartbeatTTL =
	// PinnedTTL): r2 follows them all.
	waitLanes(t, 3*cfg.PinnedTTL+10*time.Second, shards, r2)
	t.Logf("shards moved %v after the kill (pin TTL %v)", time.Since(killed), cfg.PinnedTTL)
	before := r2.tr.Stats()

	r3 := startReplica(t, s, cfg, "r3")
	waitLanes(t, 15*time.Second, 3, r2, r3)
	publish(t, js, items[2*third:])
	waitAllAcked(t, js, 60*time.Second)
	want := expected(t, ncc, items, cfg.Thresholds())
	c.check(want)
	for name, r := range map[string]replica{"r0": r0, "r1": r1, "r2": r2, "r3": r3} {
		t.Logf("replica %s: %+v", name, r.tr.Stats())
	}
	if before.Warmed+before.Rebuilds == 0 {
		t.Fatalf("r2 took over shards with history and rebuilt no session: %+v", before)
	}
	if st := r3.tr.Stats(); st.Warmed+st.Rebuilds == 0 || st.Records == 0 {
		t.Fatalf("r3 joined late: want sessions rebuilt and records processed, stats %+v", st)
	}
	x, err := js.Stream(context.Background(), events.StreamExtract)
	if err != nil {
		t.Fatal(err)
	}
	if n := x.CachedInfo().State.Msgs; n != uint64(len(want)) {
		t.Fatalf("%s holds %d requests for %d decisions (emitted %d times): a decision was stored twice or lost", events.StreamExtract, n, len(want), c.emitted())
	}
}
