package triggersvc

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

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
		waitAllAcked(t, js, 20*time.Second)
		c.check(want)
		if st := tr.Stats(); st.Records != int64(len(items)) || st.Rebuilds != 0 || st.Decisions != int64(len(want)) {
			t.Fatalf("stats %+v, want %d records, no rebuilds, %d decisions", st, len(items), len(want))
		}
	})

	t.Run("restarts at random points while publishing", func(t *testing.T) {
		_, nc, js := setup(t)
		c := collect(t, nc)
		rng := rand.New(rand.NewPCG(9, 9))
		rc := cfg
		// Records delivered to a stopped instance and not processed are read
		// by Direct Get at the next start and acknowledged at their
		// redelivery (after AckWait) when no later record of their shard
		// follows.
		rc.AckWait = 2 * time.Second
		rest := items
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(len(items)/4))
			publish(t, js, rest[:n])
			rest = rest[n:]
			tr, stop := startTrigger(t, nc, rc, nil)
			target := int64(1 + rng.IntN(n))
			testpoll.Until(t, 10*time.Second, "records processed", func() bool { return tr.Stats().Records >= target })
			stop()
			t.Logf("instance stats %+v", tr.Stats())
		}
		startTrigger(t, nc, rc, nil)
		waitAllAcked(t, js, 20*time.Second)
		c.check(expected(t, nc, items, cfg.Thresholds()))
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
		waitAllAcked(t, js, 45*time.Second)
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
	cfg.AckWait = time.Minute // the restarted trigger has the records redelivered at once
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
	waitAcked(t, js, sessionSeq(t, js, "acme", "q", 3), 5*time.Second)
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
	waitAcked(t, js, sessionSeq(t, js, "acme", "live", 2), 10*time.Second)
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
	waitAcked(t, js, sessionSeq(t, js, "acme", "live", 6), 10*time.Second)
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
	svc, _, err := tr.ServeManual(ctx)
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
	svc, _, err := tr.ServeManual(context.Background())
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
