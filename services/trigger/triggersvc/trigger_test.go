package triggersvc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
)

// testConfig has small thresholds so short transcripts decide often.
func testConfig() Config {
	return Config{
		MinTokensToInit: 2000, MinTokensBetweenUpdate: 1000, ToolCallsBetweenUpdates: 3,
		ResponseQuietPeriod: 5 * time.Second, AckEvery: 50, PinnedTTL: time.Second,
	}.WithDefaults()
}

func setup(t *testing.T) (*natstest.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t)
	nc, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 4}); err != nil {
		t.Fatal(err)
	}
	return s, nc, js
}

// item is one transcript event to publish.
type item struct {
	tenant, session, typ string
	data                 any
}

// publish stores items on RECALL_TRANSCRIPT as ingest does.
func publish(t *testing.T, js jetstream.JetStream, items []item) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var futs []jetstream.PubAckFuture
	for i, it := range items {
		data, _ := json.Marshal(it.data)
		e := event.New()
		e.SetID(fmt.Sprintf("%s-%d-%d", it.session, i, rand.Int64()))
		e.SetSource("/test")
		e.SetType(it.typ)
		e.SetSubject(it.session)
		e.SetExtension(events.ExtTenant, it.tenant)
		_ = e.SetData(event.ApplicationJSON, data)
		m := natsce.NewMsg(events.TranscriptSubject(it.tenant, it.session), &e)
		m.Header.Set(jetstream.MsgIDHeader, events.DedupID(it.tenant, e.ID()))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("publish timed out")
		}
	}
}

func text(rng *rand.Rand, tokens int) string {
	return strings.Repeat("word ", tokens*4/5+rng.IntN(4))
}

// generate builds a long interleaved transcript over several sessions:
// user turns, streamed responses (thinking, text, tool_use records sharing
// a message_id), tool results, usage on some responses, subagent records,
// string content, and a compaction. Every session ends with a complete
// response.
func generate(seed uint64, perSession int) []item {
	rng := rand.New(rand.NewPCG(seed, 1))
	sessions := []struct{ tenant, session string }{{"acme", "s1"}, {"acme", "s2"}, {"acme", "s3"}, {"beta", "s1"}}
	var streams [][]item
	for si, ss := range sessions {
		var out []item
		msg := func(m events.Message) {
			m.UUID = fmt.Sprintf("%s-%s-%d", ss.tenant, ss.session, len(out))
			out = append(out, item{ss.tenant, ss.session, events.TypeMessage, m})
		}
		resp, ctxTokens := 0, int64(0)
		for len(out) < perSession {
			switch p := rng.IntN(100); {
			case p < 25:
				msg(events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text(rng, 50+rng.IntN(400))}}})
			case p < 30:
				raw, _ := json.Marshal(map[string]any{"uuid": "x", "role": "user", "content": text(rng, 100)})
				var m events.Message
				_ = json.Unmarshal(raw, &m) // string content
				msg(m)
			case p < 35:
				msg(events.Message{Role: events.RoleAssistant, QuerySource: events.QuerySubagent, MessageID: "sub",
					Content: events.Content{{Type: events.BlockText, Text: text(rng, 2000)}, {Type: events.BlockToolUse, Name: "Read", Input: json.RawMessage(`{}`)}}})
			case p < 37 && si%2 == 0:
				out = append(out, item{ss.tenant, ss.session, events.TypeSessionCompacting, events.SessionCompacting{Trigger: "auto"}})
				out = append(out, item{ss.tenant, ss.session, events.TypeSessionCompacted, events.SessionCompacted{PreTokens: ctxTokens, PostTokens: 1500}})
				ctxTokens = 1500
			default:
				resp++
				id := fmt.Sprintf("msg_%d_%d", si, resp)
				parts := 1 + rng.IntN(3)
				tools := rng.IntN(3)
				var usage *events.Usage
				if rng.IntN(3) > 0 {
					ctxTokens += int64(200 + rng.IntN(800))
					usage = &events.Usage{InputTokens: ctxTokens, OutputTokens: 100, CacheReadInputTokens: 10}
				}
				for k := 0; k < parts; k++ {
					m := events.Message{Role: events.RoleAssistant, MessageID: id, Usage: usage}
					switch {
					case k == parts-1 && tools > 0:
						for j := 0; j < tools; j++ {
							m.Content = append(m.Content, events.Block{Type: events.BlockToolUse, ID: fmt.Sprintf("tu%d", j), Name: "Bash", Input: json.RawMessage(`{"command": "ls -la"}`)})
						}
						m.StopReason = "tool_use"
					case k == 0 && parts > 1:
						m.Content = events.Content{{Type: events.BlockThinking, Thinking: text(rng, 100)}}
					default:
						m.Content = events.Content{{Type: events.BlockText, Text: text(rng, 30+rng.IntN(300))}}
						if k == parts-1 {
							m.StopReason = "end_turn"
						}
					}
					msg(m)
				}
				if tools > 0 {
					var res events.Content
					for j := 0; j < tools; j++ {
						res = append(res, events.Block{Type: events.BlockToolResult, ToolUseID: fmt.Sprintf("tu%d", j), Content: events.Content{{Type: events.BlockText, Text: text(rng, 20+rng.IntN(200))}}})
					}
					msg(events.Message{Role: events.RoleUser, Content: res})
				}
			}
		}
		msg(events.Message{Role: events.RoleAssistant, MessageID: fmt.Sprintf("final_%d", si), StopReason: "end_turn", Content: events.Content{{Type: events.BlockText, Text: "done"}}})
		streams = append(streams, out)
	}
	// Interleave the sessions randomly, keeping each session's order.
	var all []item
	for {
		var live []int
		for i := range streams {
			if len(streams[i]) > 0 {
				live = append(live, i)
			}
		}
		if len(live) == 0 {
			return all
		}
		i := live[rng.IntN(len(live))]
		n := 1 + rng.IntN(4)
		if n > len(streams[i]) {
			n = len(streams[i])
		}
		all = append(all, streams[i][:n]...)
		streams[i] = streams[i][n:]
	}
}

// expected computes the decisions from the stored transcript with the pure
// state machine, the way a trigger that never stopped would.
func expected(t *testing.T, nc *nats.Conn, items []item, th memory.Thresholds) map[string]events.ExtractionRequested {
	t.Helper()
	out := map[string]events.ExtractionRequested{}
	seen := map[[2]string]bool{}
	r := transcript.NewReader(nc)
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

// waitAcked waits until the trigger's consumer acknowledged seq.
func waitAcked(t *testing.T, js jetstream.JetStream, seq uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		c, err := js.Consumer(context.Background(), events.StreamTranscript, events.DurableTrigger)
		if err == nil {
			if info, err := c.Info(context.Background()); err == nil && info.AckFloor.Stream >= seq {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer did not acknowledge seq %d within %v", seq, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastSeq(t *testing.T, js jetstream.JetStream) uint64 {
	s, err := js.Stream(context.Background(), events.StreamTranscript)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

func TestDeterminism(t *testing.T) {
	items := generate(42, 150)
	cfg := testConfig()

	t.Run("straight through", func(t *testing.T) {
		_, nc, js := setup(t)
		c := collect(t, nc)
		publish(t, js, items)
		want := expected(t, nc, items, cfg.Thresholds())
		if len(want) < 20 {
			t.Fatalf("only %d expected decisions: the transcript is too weak", len(want))
		}
		tr, _ := startTrigger(t, nc, cfg, nil)
		waitAcked(t, js, lastSeq(t, js), 20*time.Second)
		c.check(want)
		if st := tr.Stats(); st.Records != int64(len(items)) || st.Rebuilds != 0 || st.Decisions != int64(len(want)) {
			t.Fatalf("stats %+v, want %d records, no rebuilds, %d decisions", st, len(items), len(want))
		}
	})

	t.Run("restarts at random points while publishing", func(t *testing.T) {
		_, nc, js := setup(t)
		c := collect(t, nc)
		rng := rand.New(rand.NewPCG(9, 9))
		rest := items
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(len(items)/4))
			publish(t, js, rest[:n])
			rest = rest[n:]
			tr, stop := startTrigger(t, nc, cfg, nil)
			target := int64(1 + rng.IntN(n))
			testpoll.Until(t, 10*time.Second, "records processed", func() bool { return tr.Stats().Records >= target })
			stop()
			t.Logf("instance stats %+v", tr.Stats())
		}
		tr, _ := startTrigger(t, nc, cfg, nil)
		waitAcked(t, js, lastSeq(t, js), 20*time.Second)
		c.check(expected(t, nc, items, cfg.Thresholds()))
		_ = tr
	})

	t.Run("redeliveries and evictions", func(t *testing.T) {
		_, nc, js := setup(t)
		c := collect(t, nc)
		publish(t, js, items)
		rc := cfg
		rc.AckWait = 300 * time.Millisecond // acks are rare: the server redelivers
		rc.AckEvery = 1 << 20
		rc.MaxSessions = 2 // constant eviction and rebuild
		tr, _ := startTrigger(t, nc, rc, nil)
		waitAcked(t, js, lastSeq(t, js), 45*time.Second)
		c.check(expected(t, nc, items, cfg.Thresholds()))
		st := tr.Stats()
		if st.Rebuilds == 0 || st.Evictions == 0 {
			t.Fatalf("stats %+v: want evictions and rebuilds", st)
		}
		t.Logf("stats %+v", st)
	})
}

func TestQuietPeriodSurvivesRestart(t *testing.T) {
	_, nc, js := setup(t)
	c := collect(t, nc)
	cfg := testConfig()
	cfg.ResponseQuietPeriod = 300 * time.Millisecond
	cfg.AckWait = time.Second // records read by the restarted trigger are acked at their redelivery
	// A response streamed without stop_reason: only the quiet period
	// completes it.
	items := []item{
		{"acme", "q", events.TypeMessage, events.Message{UUID: "u1", Role: "user", Content: events.Content{{Type: "text", Text: strings.Repeat("x", 12000)}}}},
		{"acme", "q", events.TypeMessage, events.Message{UUID: "a1", Role: "assistant", MessageID: "m1", Content: events.Content{{Type: "thinking", Thinking: "hmm"}}}},
		{"acme", "q", events.TypeMessage, events.Message{UUID: "a2", Role: "assistant", MessageID: "m1", Content: events.Content{{Type: "text", Text: "answer"}}}},
	}
	publish(t, js, items)
	// The first trigger stops before the quiet period ends: the held record
	// is not acknowledged, so the next one decides.
	tr, stop := startTrigger(t, nc, cfg, nil)
	testpoll.Until(t, 5*time.Second, "records", func() bool { return tr.Stats().Records == 3 })
	stop()
	if n := len(c.snapshot()); n != 0 {
		t.Fatalf("%d decisions before the quiet period ended", n)
	}
	tr2, _ := startTrigger(t, nc, cfg, nil)
	testpoll.Until(t, 10*time.Second, "quiet decision", func() bool { return len(c.snapshot()) == 1 })
	got := c.snapshot()["acme:q:3"]
	if got.UpToID != "a2" || got.Counters.NaturalBreak != true {
		t.Fatalf("decision %+v, want up to a2 at a natural break", got)
	}
	waitAcked(t, js, 3, 5*time.Second)
	if st := tr2.Stats(); st.Rebuilds+st.Warmed != 1 {
		t.Fatalf("stats %+v: want the session rebuilt after the restart", st)
	}
}

func TestTenantThresholdChangeApplies(t *testing.T) {
	_, nc, js := setup(t)
	c := collect(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := tenantcfg.Watch(ctx, js, nil)
	if err != nil {
		t.Fatal(err)
	}
	startTrigger(t, nc, Config{AckEvery: 1}.WithDefaults(), store) // reference defaults: 10000 tokens to init
	turn := func(i int) []item {
		return []item{
			{"acme", "live", events.TypeMessage, events.Message{UUID: fmt.Sprintf("u%d", i), Role: "user", Content: events.Content{{Type: "text", Text: strings.Repeat("y", 4000)}}}},
			{"acme", "live", events.TypeMessage, events.Message{UUID: fmt.Sprintf("a%d", i), Role: "assistant", MessageID: fmt.Sprintf("m%d", i), StopReason: "end_turn", Content: events.Content{{Type: "text", Text: "ok"}}}},
		}
	}
	publish(t, js, turn(1)) // ~1000 tokens: nothing with the defaults
	waitAcked(t, js, 2, 10*time.Second)
	if n := len(c.snapshot()); n != 0 {
		t.Fatalf("%d decisions with default thresholds", n)
	}
	ch := store.Changed()
	if _, err := tenantcfg.Put(ctx, js, "acme", events.TenantConfig{MinimumMessageTokensToInit: 1500, MinimumTokensBetweenUpdate: 500}); err != nil {
		t.Fatal(err)
	}
	<-ch
	publish(t, js, turn(2)) // ~2000 tokens: above the tenant's 1500
	testpoll.Until(t, 10*time.Second, "decision after the threshold change", func() bool { return len(c.snapshot()) == 1 })
	if got := c.snapshot()["acme:live:4"]; got.UpToID != "a2" {
		t.Fatalf("decision %+v, want up to a2", got)
	}
	// Gate off: decisions are no longer published.
	off := false
	ch = store.Changed()
	if _, err := tenantcfg.Put(ctx, js, "acme", events.TenantConfig{SessionMemory: &off, MinimumMessageTokensToInit: 1500, MinimumTokensBetweenUpdate: 500}); err != nil {
		t.Fatal(err)
	}
	<-ch
	publish(t, js, turn(3))
	waitAcked(t, js, 6, 10*time.Second)
	if n := len(c.snapshot()); n != 1 {
		t.Fatalf("%d decisions, want none while session_memory is off", n)
	}
}

// responder plays the extractor: it consumes RECALL_EXTRACT and publishes
// the completed (or failed) event for every request.
func responder(t *testing.T, nc *nats.Conn, js jetstream.JetStream, fail bool) {
	t.Helper()
	ctx := context.Background()
	cons, err := js.CreateOrUpdateConsumer(ctx, events.StreamExtract, jetstream.ConsumerConfig{
		Durable: "test-responder", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: events.SubjectExtractPartitioned + ".>",
	})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var req events.ExtractionRequested
		_ = json.Unmarshal(m.Data(), &req)
		e := event.New()
		e.SetID(fmt.Sprintf("done-%d", req.UpToSeq))
		e.SetSource("/test/extractor")
		e.SetSubject(req.Session)
		kind := events.KindExtractionCompleted
		if fail {
			kind = events.KindExtractionFailed
			e.SetType(events.TypeExtractionFailed)
			_ = e.SetData(event.ApplicationJSON, events.ExtractionFailed{Tenant: req.Tenant, Session: req.Session, UpToSeq: req.UpToSeq, Error: "provider down", Parked: true})
		} else {
			// Like the extractor: commit the memory, then announce it.
			if kv, err := js.KeyValue(ctx, events.BucketMemory); err == nil {
				b, _ := json.Marshal(events.MemoryRecord{Notes: "# notes", CoveredSeq: req.UpToSeq, LastSummarizedSeq: req.UpToSeq})
				_, _ = kv.Put(ctx, events.MemoryKey(req.Tenant, req.Session), b)
			}
			e.SetType(events.TypeExtractionCompleted)
			_ = e.SetData(event.ApplicationJSON, events.ExtractionCompleted{Tenant: req.Tenant, Session: req.Session, UpToSeq: req.UpToSeq, CoveredSeq: req.UpToSeq, Revision: 7})
		}
		_, _ = js.PublishMsg(ctx, natsce.NewMsg(events.EventsSubject(kind, req.Tenant, req.Session), &e))
		_ = m.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
}

func TestManualExtraction(t *testing.T) {
	_, nc, js := setup(t)
	tr, err := New(nc, testConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := tr.ServeManual(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	call := func(session string, body string) (events.ExtractResult, *nats.Msg) {
		t.Helper()
		m, err := chunked.Request(ctx, nc, events.APISubject(events.VerbExtract, "acme", session), nil, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var r events.ExtractResult
		_ = json.Unmarshal(m.Data, &r)
		return r, m
	}

	t.Run("empty session", func(t *testing.T) {
		_, m := call("nothing", "")
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "422" || !strings.HasPrefix(m.Header.Get("Nats-Service-Error"), ErrNoMessages) {
			t.Fatalf("error %q %q, want 422 %s", code, m.Header.Get("Nats-Service-Error"), ErrNoMessages)
		}
	})
	publish(t, js, []item{
		{"acme", "man", events.TypeMessage, events.Message{UUID: "u1", Role: "user", Content: events.Content{{Type: "text", Text: "hi"}}}},
		{"acme", "man", events.TypeMessage, events.Message{UUID: "a1", Role: "assistant", MessageID: "m", Content: events.Content{{Type: "text", Text: "hello"}}}},
	})
	t.Run("timeout without an extractor", func(t *testing.T) {
		_, m := call("man", `{"timeout_ms":200}`)
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "504" {
			t.Fatalf("error code %q, want 504", code)
		}
	})
	t.Run("success", func(t *testing.T) {
		responder(t, nc, js, false)
		r, _ := call("man", "")
		if !r.Success || r.MemoryKey != "acme.man" || r.UpToSeq != 2 || r.Revision == 0 {
			t.Fatalf("result %+v", r)
		}
	})
	t.Run("micro stats are true", func(t *testing.T) {
		_, m := call("man", `{not json`)
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "400" {
			t.Fatalf("bad body: error code %q, want 400", code)
		}
		st := svc.Stats().Endpoints[0]
		// Four requests: empty session (422), timeout (504), success, bad
		// body (400). micro counts the errors a handler answers before it
		// returns: the refusal; the outcomes of waits answered later are
		// counted by recall_trigger_manual_total{outcome}.
		if st.NumRequests != 4 || st.NumErrors != 1 || !strings.Contains(st.LastError, "decoding extract request") {
			t.Fatalf("endpoint stats %+v: want 4 requests and the refusal counted as an error", st)
		}
	})
}

func TestManualExtractionFailure(t *testing.T) {
	_, nc, js := setup(t)
	tr, _ := New(nc, testConfig(), nil, nil)
	svc, err := tr.ServeManual(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	publish(t, js, []item{{"acme", "f", events.TypeMessage, events.Message{UUID: "u1", Role: "user", Content: events.Content{{Type: "text", Text: "hi"}}}}})
	responder(t, nc, js, true)
	m, err := chunked.Request(context.Background(), nc, events.APISubject(events.VerbExtract, "acme", "f"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r events.ExtractResult
	_ = json.Unmarshal(m.Data, &r)
	if r.Success || r.Error != "provider down" {
		t.Fatalf("result %+v", r)
	}
}

func TestFailover(t *testing.T) {
	s, _, js := setup(t)
	nc1, _ := s.Connect(t)
	nc2, _ := s.Connect(t)
	ncc, _ := s.Connect(t)
	c := collect(t, ncc)
	items := generate(7, 100)
	cfg := testConfig()
	half := len(items) / 2

	a, _ := startTrigger(t, nc1, cfg, nil)
	publish(t, js, items[:half])
	testpoll.Until(t, 10*time.Second, "active replica processing", func() bool { return a.Stats().Records >= int64(half/2) })
	b, _ := startTrigger(t, nc2, cfg, nil)
	waitAcked(t, js, uint64(half), 20*time.Second)
	if n := b.Stats().Delivered; n != 0 {
		t.Fatalf("the standby was delivered %d records while the active replica ran", n)
	}
	// The active replica dies without a clean shutdown.
	nc1.Close()
	publish(t, js, items[half:])
	waitAcked(t, js, lastSeq(t, js), 30*time.Second)
	if b.Stats().Delivered == 0 {
		t.Fatal("the standby never took over")
	}
	c.check(expected(t, ncc, items, cfg.Thresholds()))
}
