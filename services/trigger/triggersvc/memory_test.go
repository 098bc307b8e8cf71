package triggersvc

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
	"weak"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/events"
)

// The evicted set never grows past the cache bound, whatever the churn.
func TestEvictedSetBounded(t *testing.T) {
	var st counters
	c := newSessionCache(10, &st)
	c.fromStart = true
	for i := range 10000 {
		key := fmt.Sprintf("acme.s%d", i)
		c.add(newSession(key, 4, int64(i)))
		if len(c.evicted) > c.max {
			t.Fatalf("evicted set holds %d entries, bound %d", len(c.evicted), c.max)
		}
	}
	if c.len() > c.max {
		t.Fatalf("%d sessions in memory, bound %d", c.len(), c.max)
	}
	if c.fromStart {
		t.Fatal("the set overflowed but unknown sessions are still taken for new ones")
	}
	if !c.needsRebuild("acme.s1", 5) {
		t.Fatal("an evicted session would not be rebuilt")
	}
}

// A supervised restart loop leaves nothing behind: every stopped trigger
// is collected (the metrics callback is unregistered) and the heap does
// not grow with the number of restarts.
func TestRestartLoopNoGrowth(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	_, nc, js := setup(t)
	cfg := testConfig()
	var gone []weak.Pointer[Trigger]
	var heap []uint64
	for i := range 12 {
		tr, stop := startTrigger(t, nc, cfg, nil)
		testpoll.Until(t, 10*time.Second, "consuming", tr.Ready)
		items := generate(uint64(21+i), 15) // new sessions every time
		for j := range items {
			items[j].session = fmt.Sprintf("r%d-%s", i, items[j].session)
		}
		publish(t, js, items)
		testpoll.Until(t, 10*time.Second, "records", func() bool { return tr.Stats().Records >= int64(len(items)) })
		stop()
		gone = append(gone, weak.Make(tr))
		tr = nil
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = append(heap, ms.HeapAlloc)
		_ = i
	}
	runtime.GC()
	for i, w := range gone {
		if w.Value() != nil {
			t.Fatalf("trigger %d is still reachable after it stopped", i)
		}
	}
	t.Logf("heap after each restart: %v", heap)
	if heap[len(heap)-1] > heap[2]+8<<20 {
		t.Fatalf("heap grew from %d to %d bytes over the restarts", heap[2], heap[len(heap)-1])
	}
}

// After a restart every session comes back from one read of the
// transcript (no per-session rebuild), and the decisions are unchanged.
func TestWarmStart(t *testing.T) {
	st := restartHalfway(t, func(*Config) {})
	if st.Warmed != 4 || st.Rebuilds != 0 {
		t.Fatalf("stats %+v: want the 4 sessions warmed and no per-session rebuild", st)
	}
}

// A warm start that cannot hold every session is abandoned: the sessions
// are rebuilt one by one instead, and the decisions are unchanged. The
// bound is per shard (MaxSessions / S): a shard whose sessions fit is
// warmed, one whose sessions do not is abandoned.
func TestWarmStartAbandonedWhenSessionsDoNotFit(t *testing.T) {
	const maxSessions = 2
	layout := events.NewLayout(events.DefaultShards)
	perShard := map[int]int{}
	for _, s := range [][2]string{{"acme", "s1"}, {"acme", "s2"}, {"acme", "s3"}, {"beta", "s1"}} { // generate's sessions
		perShard[layout.Shard(s[0], s[1])]++
	}
	fit, abandoned := 0, 0
	for _, n := range perShard {
		if n <= max(maxSessions/layout.Shards(), 1) {
			fit += n
		} else {
			abandoned++
		}
	}
	if abandoned == 0 {
		t.Fatalf("sessions per shard %v: no shard's sessions exceed its share of MaxSessions, the test shows nothing", perShard)
	}
	st := restartHalfway(t, func(c *Config) { c.MaxSessions = maxSessions })
	if st.Warmed != int64(fit) || st.Rebuilds == 0 {
		t.Fatalf("stats %+v: want %d sessions warmed (the shards whose sessions fit) and per-session rebuilds", st, fit)
	}
}

// restartHalfway runs a trigger over half of a generated transcript, stops
// it, stores the rest, and runs a trigger configured by mod over it; it
// checks the decisions equal a straight run's and returns the second
// trigger's stats.
func restartHalfway(t *testing.T, mod func(*Config)) Stats {
	return restartHalfwayWith(t, mod, nil)
}

// restartHalfwayWith is restartHalfway with mod applied to both runs when
// first is not nil, which receives the first run's stats.
func restartHalfwayWith(t *testing.T, mod func(*Config), first *Stats) Stats {
	_, nc, js := setup(t)
	c := collect(t, nc)
	items := generate(31, 120)
	cfg := testConfig()
	if first != nil {
		mod(&cfg)
	}
	half := len(items) / 2
	publish(t, js, items[:half])
	tr1, stop := startTrigger(t, nc, cfg, nil)
	waitAllAcked(t, js, 20*time.Second)
	stop()
	if first != nil {
		*first = tr1.Stats()
	}
	publish(t, js, items[half:])
	second := cfg
	mod(&second)
	tr, _ := startTrigger(t, nc, second, nil)
	waitAllAcked(t, js, 20*time.Second)
	c.check(expected(t, nc, items, cfg.Thresholds()))
	return tr.Stats()
}

// Sessions evicted and rebuilt over and over (two fit in memory, four
// interleave) with a snapshot every 20 of their records: rebuilds replay
// only what follows a snapshot, in the first run and after a restart, and
// the decisions equal a straight run's.
func TestRebuildsFromSnapshots(t *testing.T) {
	var first Stats
	st := restartHalfwayWith(t, func(c *Config) { c.MaxSessions, c.SnapshotEvery = 2, 20 }, &first)
	if first.Snapshots == 0 || first.FromSnapshot == 0 || st.FromSnapshot == 0 {
		t.Fatalf("first run %+v, after the restart %+v: want snapshots stored and rebuilds from them", first, st)
	}
}

// A replay that starts from a snapshot computes the very state a replay
// from the first record computes, before any record of each session.
func TestSnapshotReplayEqualsFullReplay(t *testing.T) {
	_, nc, js := setup(t)
	items := generate(31, 120)
	publish(t, js, items)
	cfg := testConfig()
	cfg.MaxSessions, cfg.SnapshotEvery = 2, 20
	tr, stop := startTrigger(t, nc, cfg, nil)
	waitAllAcked(t, js, 20*time.Second)
	stop()
	ctx := context.Background()
	tr.snaps.open(ctx)
	th := cfg.Thresholds()
	last := lastSeqs(t, js)
	layout := serverLayout(t, js)
	for _, s := range []struct{ tenant, session string }{{"acme", "s1"}, {"acme", "s2"}, {"beta", "s1"}} {
		last := last[layout.Shard(s.tenant, s.session)]
		for seq := uint64(2); seq <= last+1; seq += 7 {
			before := tr.stats.fromSnapshot.Load()
			got, err := replay(ctx, &tr.laneDeps, s.tenant, s.session, seq, &th)
			if err != nil {
				t.Fatal(err)
			}
			used := tr.stats.fromSnapshot.Load() > before
			kv := tr.snaps.kv.Swap(nil)
			want, err := replay(ctx, &tr.laneDeps, s.tenant, s.session, seq, &th)
			tr.snaps.kv.Store(kv)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s/%s before %d (from a snapshot: %v): %+v, a whole replay %+v", s.tenant, s.session, seq, used, got, want)
			}
		}
	}
	if tr.stats.fromSnapshot.Load() == 0 {
		t.Fatal("no replay started from a snapshot")
	}
}
