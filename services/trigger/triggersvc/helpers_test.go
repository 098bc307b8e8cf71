package triggersvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// testConfig has small thresholds so short transcripts decide often.
func testConfig() Config {
	return Config{
		MinTokensToInit: 2000, MinTokensBetweenUpdate: 1000, ToolCallsBetweenUpdates: 3,
		ResponseQuietPeriod: 5 * time.Second, AckEvery: 50, PinnedTTL: time.Second,
	}.WithDefaults()
}

// setup starts a server with Recall's streams: the transcript in the
// default number of shards (events.DefaultShards, testConfig's).
func setup(t *testing.T) (*natstest.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	return setupShards(t, 0)
}

// setupShards is setup with the transcript in shards shards (0: the
// default); the triggers' Config.Shards must say the same.
func setupShards(t *testing.T, shards int) (*natstest.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4, Shards: shards}); err != nil {
		t.Fatal(err)
	}
	return s, nc, js
}

// serverLayout is the transcript's shard layout as the server records it.
func serverLayout(t testing.TB, js jetstream.JetStream) events.Layout {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// expected computes the decisions from the stored transcript with the pure
// state machine, the way a trigger that never stopped would.
func expected(t *testing.T, nc *nats.Conn, items []item, th memory.Thresholds) map[string]events.ExtractionRequested {
	t.Helper()
	out := map[string]events.ExtractionRequested{}
	seen := map[[2]string]bool{}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	r := transcript.NewReader(nc, serverLayout(t, js))
	for _, it := range items {
		k := [2]string{it.tenant, it.session}
		if seen[k] {
			continue
		}
		seen[k] = true
		var st memory.TriggerState
		var ds []memory.TriggerDecision
		err := r.Scan(context.Background(), it.tenant, it.session, 1, 0, func(rec transcript.Record) bool {
			ds = st.Observe(recordOf(&rec), &th, ds)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		ds = st.CompleteQuiet(&th, ds)
		for _, d := range ds {
			req := events.ExtractionRequested{Tenant: it.tenant, Session: it.session, UpToSeq: d.UpToSeq, UpToID: d.UpToID, Reason: events.ReasonThreshold, Counters: d.Counters}
			out[req.RequestDedupID()] = req
		}
	}
	return out
}

// collector records every extraction request published on RECALL_EVENTS
// (duplicates included) and fails the test if one position is ever
// requested with different content.
type collector struct {
	t    *testing.T
	mu   sync.Mutex
	got  map[string]events.ExtractionRequested
	n    int
	errs []string
}

func collect(t *testing.T, nc *nats.Conn) *collector {
	c := &collector{t: t, got: map[string]events.ExtractionRequested{}}
	sub, err := nc.Subscribe(events.SubjectEventsRoot+"."+events.KindExtractionRequested+".>", func(m *nats.Msg) {
		var r events.ExtractionRequested
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.n++
		if prev, ok := c.got[r.RequestDedupID()]; ok && !reflect.DeepEqual(prev, r) {
			c.errs = append(c.errs, fmt.Sprintf("%s re-emitted differently: %+v then %+v", r.RequestDedupID(), prev, r))
		}
		c.got[r.RequestDedupID()] = r
		if m.Header.Get(jetstream.MsgIDHeader) != r.RequestDedupID() || m.Header.Get("ce-type") != events.TypeExtractionRequested {
			c.errs = append(c.errs, fmt.Sprintf("bad headers %v", m.Header))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return c
}

func (c *collector) snapshot() map[string]events.ExtractionRequested {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]events.ExtractionRequested, len(c.got))
	for k, v := range c.got {
		out[k] = v
	}
	return out
}

func (c *collector) check(want map[string]events.ExtractionRequested) {
	c.t.Helper()
	c.mu.Lock()
	errs := c.errs
	c.mu.Unlock()
	if len(errs) > 0 {
		c.t.Fatalf("%d inconsistent emissions, first: %s", len(errs), errs[0])
	}
	got := c.snapshot()
	if !reflect.DeepEqual(got, want) {
		for k, v := range got {
			if w, ok := want[k]; !ok || !reflect.DeepEqual(w, v) {
				c.t.Logf("got  %s %+v", k, v)
			}
		}
		for k, v := range want {
			if w, ok := got[k]; !ok || !reflect.DeepEqual(w, v) {
				c.t.Logf("want %s %+v", k, v)
			}
		}
		c.t.Fatalf("requests differ from the straight-through computation:\n got %d: %v\nwant %d: %v", len(got), keys(got), len(want), keys(want))
	}
}

func keys(m map[string]events.ExtractionRequested) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// startTrigger runs a trigger on nc until the returned stop is called.
func startTrigger(t *testing.T, nc *nats.Conn, cfg Config, tenants *tenantcfg.Store) (*Trigger, func()) {
	t.Helper()
	var log *slog.Logger
	if os.Getenv("TRIGGER_DEBUG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	tr, err := New(nc, cfg, tenants, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("trigger run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return tr, stop
}

// shardSeqs holds one stream sequence per shard (index = shard).
type shardSeqs []uint64

// lastSeqs returns every shard stream's last sequence.
func lastSeqs(t *testing.T, js jetstream.JetStream) shardSeqs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	layout := serverLayout(t, js)
	out := make(shardSeqs, layout.Shards())
	for k, name := range layout.Streams() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = s.CachedInfo().State.LastSeq
	}
	return out
}

// total is the sum of the sequences: with fresh streams, the records
// stored.
func (s shardSeqs) total() uint64 {
	var n uint64
	for _, v := range s {
		n += v
	}
	return n
}

// ackFloors returns the ack floor of the trigger's durable on every shard
// (0 where it does not exist yet).
func ackFloors(t *testing.T, js jetstream.JetStream) shardSeqs {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	layout := serverLayout(t, js)
	out := make(shardSeqs, layout.Shards())
	for k, name := range layout.Streams() {
		c, err := js.Consumer(ctx, name, events.DurableTrigger)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = info.AckFloor.Stream
	}
	return out
}

// waitAcked waits until the trigger's durable on every shard k
// acknowledged want[k] (nothing is awaited where want[k] is 0).
func waitAcked(t *testing.T, js jetstream.JetStream, want shardSeqs, d time.Duration) {
	t.Helper()
	testpoll.Until(t, d, fmt.Sprintf("the shards acknowledging %v", want), func() bool {
		got := ackFloors(t, js)
		for k, w := range want {
			if got[k] < w {
				return false
			}
		}
		return true
	})
}

// waitAllAcked waits until every shard's records are acknowledged.
func waitAllAcked(t *testing.T, js jetstream.JetStream, d time.Duration) {
	t.Helper()
	waitAcked(t, js, lastSeqs(t, js), d)
}

// sessionSeq is the shardSeqs that names seq in the shard of one session.
func sessionSeq(t *testing.T, js jetstream.JetStream, tenant, session string, seq uint64) shardSeqs {
	t.Helper()
	layout := serverLayout(t, js)
	out := make(shardSeqs, layout.Shards())
	out[layout.Shard(tenant, session)] = seq
	return out
}

// emitted is the number of requests published, re-emissions included.
func (c *collector) emitted() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
