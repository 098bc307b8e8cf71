package triggersvc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// manySessions interleaves generate's transcripts of sets seeds into one,
// each set under its own session names.
func manySessions(sets int, perSession int) []item {
	var all [][]item
	for k := range sets {
		its := generate(uint64(100+k), perSession)
		for i := range its {
			its[i].session = fmt.Sprintf("k%d-%s", k, its[i].session)
		}
		all = append(all, its)
	}
	var out []item
	for i := 0; ; i++ {
		added := false
		for _, its := range all {
			if i < len(its) {
				out = append(out, its[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// waitPartitionsAcked waits until every partition consumer acknowledged seq.
func waitPartitionsAcked(t *testing.T, js jetstream.JetStream, parts int, seq uint64, d time.Duration) {
	t.Helper()
	testpoll.Until(t, d, fmt.Sprintf("every partition acknowledging %d", seq), func() bool {
		for p := range parts {
			c, err := js.Consumer(context.Background(), events.StreamTranscript, events.TriggerDurable(p, parts))
			if err != nil {
				return false
			}
			info, err := c.Info(context.Background())
			if err != nil || info.AckFloor.Stream < seq {
				return false
			}
		}
		return true
	})

}

// Three partitioned replicas share the sessions; one is killed without a
// clean shutdown, one stops cleanly and a new one joins, while records
// arrive. The decisions equal the straight-through computation of a
// single replica, and more than one replica did work.
func TestPartitionedReplicasDeterminism(t *testing.T) {
	s, ncc, js := setup(t)
	c := collect(t, ncc)
	items := manySessions(4, 60)
	cfg := testConfig()
	cfg.TriggerPartitions = 6
	cfg.AckWait = 2 * time.Second // records read at start are acked at their redelivery
	cfg.PinnedTTL = time.Second
	third := len(items) / 3

	var trs []*Trigger
	var stops []func()
	conns := make([]func(), 0)
	for i := range 3 {
		nc, _ := s.Connect(t)
		cfg.MemberID = fmt.Sprintf("r%d", i)
		tr, stop := startTrigger(t, nc, cfg, nil)
		trs, stops, conns = append(trs, tr), append(stops, stop), append(conns, nc.Close)
	}
	testpoll.Until(t, 10*time.Second, "partitions shared", func() bool {
		n := 0
		for _, tr := range trs {
			n += tr.Stats().Lanes
		}
		return n == cfg.TriggerPartitions && trs[0].Stats().Lanes > 0 && trs[1].Stats().Lanes > 0 && trs[2].Stats().Lanes > 0
	})

	publish(t, js, items[:third])
	testpoll.Until(t, 20*time.Second, "work shared", func() bool { return trs[0].Stats().Records > 0 && trs[1].Stats().Records > 0 })
	conns[0]() // replica 0 dies: no clean shutdown
	killed := time.Now()
	// Its partitions move once its membership expires (HeartbeatTTL =
	// PinnedTTL): the others own them all.
	testpoll.Until(t, 3*cfg.PinnedTTL+2*time.Second, "the lost replica's partitions moving", func() bool {
		return trs[1].Stats().Lanes+trs[2].Stats().Lanes == cfg.TriggerPartitions
	})

	t.Logf("partitions moved %v after the kill (pin TTL %v)", time.Since(killed), cfg.PinnedTTL)
	publish(t, js, items[third:2*third])
	stops[1]() // replica 1 stops cleanly
	cfg.MemberID = "r3"
	nc3, _ := s.Connect(t)
	tr3, _ := startTrigger(t, nc3, cfg, nil)
	publish(t, js, items[2*third:])
	waitPartitionsAcked(t, js, cfg.TriggerPartitions, lastSeq(t, js), 60*time.Second)
	c.check(expected(t, ncc, items, cfg.Thresholds()))
	for i, tr := range append(trs, tr3) {
		t.Logf("replica %d: %+v", i, tr.Stats())
	}
	if tr3.Stats().Records == 0 {
		t.Fatal("the replica that joined late did no work")
	}
}

// Partition durables read the stream unfiltered: a filter on a stream
// whose subjects it covers anyway made the server search each block's
// subject tree for every delivery (a wildcard filter is not recognised as
// "everything"), several times the cost of the unfiltered path while
// tailing many sessions. A durable created with the filter by an earlier
// version loses it when the trigger starts, and keeps its position.
func TestPartitionDurablesUnfiltered(t *testing.T) {
	s, ncc, js := setup(t)
	c := collect(t, ncc)
	items := manySessions(2, 40)
	cfg := testConfig()
	cfg.TriggerPartitions = 2
	ctx := context.Background()
	for p := range cfg.TriggerPartitions {
		old := cfg.WithDefaults().ConsumerConfig()
		old.Durable = events.TriggerDurable(p, cfg.TriggerPartitions)
		old.FilterSubject = events.SubjectTranscriptRoot + ".>"
		if _, err := js.CreateConsumer(ctx, events.StreamTranscript, old); err != nil {
			t.Fatal(err)
		}
	}
	publish(t, js, items[:len(items)/2])
	nc, _ := s.Connect(t)
	startTrigger(t, nc, cfg, nil)
	publish(t, js, items[len(items)/2:])
	waitPartitionsAcked(t, js, cfg.TriggerPartitions, lastSeq(t, js), 30*time.Second)
	for p := range cfg.TriggerPartitions {
		cons, err := js.Consumer(ctx, events.StreamTranscript, events.TriggerDurable(p, cfg.TriggerPartitions))
		if err != nil {
			t.Fatal(err)
		}
		if cc := cons.CachedInfo().Config; cc.FilterSubject != "" || len(cc.FilterSubjects) > 0 {
			t.Fatalf("partition %d reads with filter %q %v", p, cc.FilterSubject, cc.FilterSubjects)
		}
	}
	c.check(expected(t, ncc, items, cfg.Thresholds()))
}
