package compactorsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/lifecycle"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
	"github.com/recallhq/recall/pkg/memory"
)

func TestServedFromSessionMemory(t *testing.T) {
	e := startEnv(t, envOptions{})
	// Another session's records interleave, so sequences are sparse.
	e.publish("other", conversation(3, 100)...)
	uuids, seqs := e.publish("s1", conversation(6, 3000)...)
	e.publish("other", conversation(2, 100)...)
	more, moreSeqs := e.publish("s1", conversation(1, 100)...)
	uuids, seqs = append(uuids, more...), append(seqs, moreSeqs...)

	// The notes cover up to the answer of turn 3 (index 15).
	rev := e.putMemory("s1", events.MemoryRecord{Notes: notes("Adding rate limiting."), LastSummarizedID: uuids[15], LastSummarizedSeq: seqs[15], CoveredSeq: seqs[15]})
	r := e.compact("s1", events.CompactRequest{Trigger: events.TriggerManual})

	if r.Outcome != memory.OutcomeSessionMemory || !r.Served {
		t.Fatalf("outcome %q (%s)", r.Outcome, r.Reason)
	}
	got := keptUUIDs(t, r)
	// After the summarized point: turns 4, 5 (~3,535 tokens each) and the
	// last one (~635): 7,705 tokens, padded by 4/3 as the reference pads
	// its estimate: 10,274, with 6 text messages. That meets the keep
	// window's minimum (10,000 tokens and 5 text messages): no growth.
	if want := uuids[16:]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kept %v\nwant %v", got, want)
	}
	if r.KeptCount != len(got) || r.FirstKeptSeq != seqs[16] || r.LastSeq != seqs[len(seqs)-1] {
		t.Errorf("kept_count %d first %d last %d", r.KeptCount, r.FirstKeptSeq, r.LastSeq)
	}
	for i, ev := range r.Kept {
		if s, _ := ev.Extensions()[events.ExtSeq].(string); s != fmt.Sprint(seqs[16+i]) {
			t.Errorf("kept %d: %s = %q, want %d", i, events.ExtSeq, s, seqs[16+i])
		}
	}
	if r.Summary == nil || !r.Summary.IsCompactSummary || r.Summary.Role != events.RoleUser || !strings.Contains(r.Summary.Content[0].Text, "Adding rate limiting.") {
		t.Fatalf("summary %+v", r.Summary)
	}
	b := r.Boundary
	if b == nil || b.Type != "system" || b.Subtype != "compact_boundary" || b.Trigger != "manual" || b.PreTokens != r.TokensBefore || b.PreservedSegment == nil ||
		b.PreservedSegment.HeadUUID != uuids[16] || b.PreservedSegment.TailUUID != uuids[len(uuids)-1] || b.PreservedSegment.AnchorUUID != r.Summary.UUID {
		t.Fatalf("boundary %+v %+v", b, b.PreservedSegment)
	}
	if r.LastSummarizedID != uuids[15] || r.LastSummarizedSeq != seqs[15] || r.MemoryRevision != rev || r.Threshold != 167000 {
		t.Errorf("ids/seqs/revision/threshold: %+v", r)
	}
	if r.TokensAfter <= memory.EstimateText(r.Summary.Content[0].Text) || r.TokensBefore <= r.TokensAfter {
		t.Errorf("tokens %d -> %d", r.TokensBefore, r.TokensAfter)
	}

	// compaction.served was published.
	ctx := context.Background()
	st, _ := e.js.Stream(ctx, events.StreamEvents)
	m, err := st.GetLastMsgForSubject(ctx, events.EventsSubject(events.KindCompactionServed, tenant, "s1"))
	for i := 0; err != nil && i < 100; i++ { // published right after the reply
		time.Sleep(20 * time.Millisecond)
		m, err = st.GetLastMsgForSubject(ctx, events.EventsSubject(events.KindCompactionServed, tenant, "s1"))
	}
	if err != nil {
		t.Fatalf("compaction.served: %v", err)
	}
	var served events.CompactionServed
	ev, _ := natsce.Decode(m.Header, m.Data)
	_ = json.Unmarshal(ev.Data(), &served)
	if ev.Type() != events.TypeCompactionServed || served.Outcome != memory.OutcomeSessionMemory || served.KeptMessages != len(got) || served.TokensAfter != r.TokensAfter {
		t.Errorf("compaction.served %s %+v", ev.Type(), served)
	}

	// Reads used Direct Get: no consumer on any transcript shard stream.
	for _, name := range e.layout.Streams() {
		ts, err := e.js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if n := ts.CachedInfo().State.Consumers; n != 0 {
			t.Errorf("transcript stream %s has %d consumers", name, n)
		}
	}
}

func TestGrowsBackwardsAcrossSparseHistory(t *testing.T) {
	e := startEnv(t, envOptions{})
	uuids, seqs := e.publish("s1", conversation(8, 1000)...)
	// 5,000 records of other sessions push the summarized point far back
	// in sequence space: the backwards reads must stretch.
	var noise []rec
	for i := 0; i < 5000; i++ {
		noise = append(noise, rec{role: events.RoleUser, text: "noise"})
	}
	e.publish("noise", noise...)
	more, moreSeqs := e.publish("s1", rec{role: events.RoleUser, text: "last request"}, rec{role: events.RoleAssistant, msgID: "m_last", text: "done"})
	uuids, seqs = append(uuids, more...), append(seqs, moreSeqs...)
	e.putMemory("s1", events.MemoryRecord{Notes: notes("x"), LastSummarizedID: uuids[len(uuids)-1], LastSummarizedSeq: seqs[len(seqs)-1]})
	r := e.compact("s1", nil)
	if r.Outcome != memory.OutcomeSessionMemory {
		t.Fatalf("outcome %q (%s)", r.Outcome, r.Reason)
	}
	got := keptUUIDs(t, r)
	// Each turn is ~1,520 tokens with 2 text messages: growing back from
	// the end needs 10,000 tokens, so 7 whole turns... and it stops on a
	// record; the kept part must start at a request or an answer, never on
	// a tool_result without its tool_use.
	if r.TokensAfter-memory.EstimateText(r.Summary.Content[0].Text) < 10000 || len(got) < 20 {
		t.Fatalf("kept %d records, %d tokens", len(got), r.TokensAfter)
	}
	first := r.Kept[0]
	var m events.Message
	_ = json.Unmarshal(first.Data(), &m)
	if len(m.Content) > 0 && m.Content[0].Type == events.BlockToolResult {
		t.Fatalf("window starts with a tool_result: %+v", m)
	}
}

func TestOutcomes(t *testing.T) {
	e := startEnv(t, envOptions{})
	uuids, seqs := e.publish("s1", conversation(4, 500)...)

	tests := []struct {
		name    string
		memory  *events.MemoryRecord
		req     events.CompactRequest
		outcome string
	}{
		{"no session memory", nil, events.CompactRequest{}, memory.OutcomeNoSessionMemory},
		{"empty template", &events.MemoryRecord{Notes: memory.DefaultTemplate}, events.CompactRequest{}, memory.OutcomeEmptyTemplate},
		{"summarized id not found", &events.MemoryRecord{Notes: notes("n"), LastSummarizedID: "gone", LastSummarizedSeq: seqs[5]}, events.CompactRequest{}, memory.OutcomeSummarizedIDNotFound},
		{"summarized id without seq found by search", &events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[11]}, events.CompactRequest{}, memory.OutcomeSessionMemory},
		{"resumed session", &events.MemoryRecord{Notes: notes("n")}, events.CompactRequest{}, memory.OutcomeResumedSession},
		{"threshold exceeded", &events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[11], LastSummarizedSeq: seqs[11]}, events.CompactRequest{AutoCompactThreshold: 1000}, memory.OutcomeThresholdExceeded},
		{"threshold from a small window", &events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[11], LastSummarizedSeq: seqs[11]}, events.CompactRequest{ContextWindow: 16000, MaxOutputTokens: 2000}, memory.OutcomeThresholdExceeded},
		// The notes cover one turn of four: keeping the other three whole
		// would not make the context smaller.
		{"no reduction", &events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[3], LastSummarizedSeq: seqs[3]}, events.CompactRequest{}, memory.OutcomeNoReduction},
		// The three uncovered turns are more than a 1,000-token window.
		{"notes behind", &events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[3], LastSummarizedSeq: seqs[3]}, events.CompactRequest{MaxTokens: 1000}, memory.OutcomeNotesBehind},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session := "s1"
			if tc.memory != nil {
				e.putMemory(session, *tc.memory)
			} else {
				_ = e.mem.Purge(context.Background(), events.MemoryKey(tenant, session))
			}
			r := e.compact(session, tc.req)
			if r.Outcome != tc.outcome {
				t.Fatalf("case %d: outcome %q, want %q (%s)", i, r.Outcome, tc.outcome, r.Reason)
			}
			if memory.Served(r.Outcome) != r.Served {
				t.Fatalf("served flag %v for %q", r.Served, r.Outcome)
			}
			if !r.Served && (r.Reason == "" || len(r.Kept) != 0 || r.Summary != nil) {
				t.Fatalf("not served, but reply %+v", r)
			}
			if r.Served && (r.Summary == nil || len(r.Kept) == 0) {
				t.Fatalf("served without summary or kept")
			}
		})
	}
}

func TestDisabledGate(t *testing.T) {
	off := false
	e := startEnv(t, envOptions{before: func(e *env) {
		if _, err := tenantcfg.Put(context.Background(), e.js, tenant, events.TenantConfig{SMCompact: &off}); err != nil {
			t.Fatal(err)
		}
	}})
	uuids, seqs := e.publish("s1", conversation(2, 100)...)
	e.putMemory("s1", events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[1], LastSummarizedSeq: seqs[1]})
	if r := e.compact("s1", nil); r.Outcome != memory.OutcomeDisabled || r.Served || !strings.Contains(r.Reason, "sm_compact") {
		t.Fatalf("reply %+v", r)
	}
}

func TestBadRequests(t *testing.T) {
	e := startEnv(t, envOptions{})
	for _, body := range []string{`{`, `{"trigger":"sometimes"}`, `{"wait_timeout_ms":-1}`, `{"bogus":1}`, `[1]`, `{"context_window":1000}`} {
		_, err := e.tryCompact("s1", body)
		if err == nil || !strings.Contains(err.Error(), "service error 400") {
			t.Errorf("body %s: %v", body, err)
		}
	}
}

// waitForWatcher waits until the compactor watches the status bucket (its
// watcher is an ordered consumer on the bucket's stream).
func (e *env) waitForWatcher() {
	e.t.Helper()
	ctx := context.Background()
	testpoll.Until(e.t, 10*time.Second, "the compactor to start waiting", func() bool {
		s, err := e.js.Stream(ctx, "KV_"+events.BucketStatus)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Consumers > 0
	})
}

func (e *env) putStatus(session string, since time.Time) {
	e.t.Helper()
	b, _ := json.Marshal(events.StatusRecord{Running: true, Since: since, Worker: "w1"})
	if _, err := e.status.Put(context.Background(), events.MemoryKey(tenant, session), b); err != nil {
		e.t.Fatal(err)
	}
}

func TestWaitForRunningExtraction(t *testing.T) {
	e := startEnv(t, envOptions{})
	uuids, seqs := e.publish("s1", conversation(4, 500)...)
	e.putMemory("s1", events.MemoryRecord{Notes: notes("OLD notes"), LastSummarizedID: uuids[7], LastSummarizedSeq: seqs[7]})

	t.Run("completes during the wait", func(t *testing.T) {
		e.putStatus("s1", time.Now())
		done := make(chan *events.CompactReply, 1)
		go func() { done <- e.compact("s1", map[string]int{"wait_timeout_ms": 20000}) }()
		e.waitForWatcher()
		e.putMemory("s1", events.MemoryRecord{Notes: notes("FRESH notes"), LastSummarizedID: uuids[11], LastSummarizedSeq: seqs[11]})
		if err := e.status.Delete(context.Background(), events.MemoryKey(tenant, "s1")); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if !strings.Contains(r.Summary.Content[0].Text, "FRESH notes") || r.LastSummarizedID != uuids[11] {
			t.Fatalf("did not get the fresh summary: %q", r.Summary.Content[0].Text[:200])
		}
		if r.WaitedMS <= 0 || r.WaitedMS >= 20000 {
			t.Fatalf("waited %d ms", r.WaitedMS)
		}
	})

	t.Run("stale status is ignored", func(t *testing.T) {
		e.putStatus("s1", time.Now().Add(-2*time.Minute))
		r := e.compact("s1", map[string]int{"wait_timeout_ms": 20000})
		if r.WaitedMS != 0 || !r.Served {
			t.Fatalf("waited %d ms on a stale status (%s)", r.WaitedMS, r.Outcome)
		}
		_ = e.status.Delete(context.Background(), events.MemoryKey(tenant, "s1"))
	})

	t.Run("timeout returns the old summary", func(t *testing.T) {
		e.putMemory("s1", events.MemoryRecord{Notes: notes("OLD notes"), LastSummarizedID: uuids[7], LastSummarizedSeq: seqs[7]})
		e.putStatus("s1", time.Now())
		r := e.compact("s1", map[string]int{"wait_timeout_ms": 300})
		if !strings.Contains(r.Summary.Content[0].Text, "OLD notes") {
			t.Fatal("not the old summary")
		}
		if r.WaitedMS < 300 || r.WaitedMS > 5000 {
			t.Fatalf("waited %d ms, want about 300", r.WaitedMS)
		}
		_ = e.status.Delete(context.Background(), events.MemoryKey(tenant, "s1"))
	})

	t.Run("a waiting request does not block other sessions", func(t *testing.T) {
		e.publish("s2", conversation(2, 100)...)
		e.putStatus("s1", time.Now())
		done := make(chan *events.CompactReply, 1)
		go func() { done <- e.compact("s1", map[string]int{"wait_timeout_ms": 20000}) }()
		e.waitForWatcher()
		r := e.compact("s2", nil)
		if r.Outcome != memory.OutcomeNoSessionMemory {
			t.Fatalf("s2: %q", r.Outcome)
		}
		select {
		case <-done:
			t.Fatal("the waiting request returned before its status changed")
		default:
		}
		_ = e.status.Delete(context.Background(), events.MemoryKey(tenant, "s1"))
		if r := <-done; !r.Served {
			t.Fatalf("s1: %q", r.Outcome)
		}
	})
}

func TestChunkedReply(t *testing.T) {
	e := startEnv(t, envOptions{server: &server.Options{MaxPayload: 64 << 10}})
	// Tool results of ~40 KB each: the kept window is several hundred KB.
	uuids, seqs := e.publish("big", conversation(6, 10000)...)
	e.putMemory("big", events.MemoryRecord{Notes: notes("big"), LastSummarizedID: uuids[11], LastSummarizedSeq: seqs[11]})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A keep window wide enough for the ~42,000 (padded) unsummarized tokens.
	m, err := chunked.Request(ctx, e.nc, events.APISubject(events.VerbCompact, tenant, "big"), nil, []byte(`{"max_tokens":60000}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) <= 64<<10 {
		t.Fatalf("reply of %d bytes did not need chunks", len(m.Data))
	}
	var r events.CompactReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("reassembled reply is not JSON: %v", err)
	}
	if r.Outcome != memory.OutcomeSessionMemory || len(r.Kept) != 12 {
		t.Fatalf("outcome %q, %d kept", r.Outcome, len(r.Kept))
	}
	// Every kept record is byte-identical to what is stored.
	ts, err := e.js.Stream(ctx, e.layout.Stream(tenant, "big"))
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range r.Kept {
		raw, err := ts.GetMsg(ctx, seqs[12+i])
		if err != nil {
			t.Fatal(err)
		}
		if string(ev.Data()) != string(raw.Data) {
			t.Fatalf("kept record %d differs from the stored one", i)
		}
	}
}

// panicProvider stands for a bug anywhere below the handler.
type panicProvider struct{}

func (panicProvider) Name() string  { return "panic" }
func (panicProvider) Model() string { return "panic" }
func (panicProvider) Complete(context.Context, llm.Request) (*llm.Response, error) {
	panic("provider bug")
}

// A panic while compacting answers the caller with a 500 instead of taking
// the service (and, under `recall up`, every service) down; the next request
// is served.
func TestPanicAnsweredAs500(t *testing.T) {
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, panicProvider{} }})
	uuids, _ := e.publish("s1", conversation(3, 200)...)
	_, err := e.tryCompact("s1", nil)
	if err == nil || !strings.Contains(err.Error(), "service error 500") {
		t.Fatalf("err = %v, want a 500 service error", err)
	}
	e.putMemory("s1", events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[7]})
	if r := e.compact("s1", nil); r.Outcome != memory.OutcomeSessionMemory {
		t.Fatalf("after the panic: outcome %q", r.Outcome)
	}
	// micro's stats show both answers, sent after the handler returned.
	m, err := e.nc.Request("$SRV.STATS."+ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(m.Data, &stats); err != nil {
		t.Fatal(err)
	}
	for _, ep := range stats.Endpoints {
		if ep.Name != events.VerbCompact {
			continue
		}
		var data struct {
			Later microapi.LaterStats `json:"answered_later"`
		}
		if err := json.Unmarshal(ep.Data, &data); err != nil {
			t.Fatal(err)
		}
		if l := data.Later; l.NumRequests != 2 || l.NumErrors != 1 || !strings.HasPrefix(l.LastError, "500:") {
			t.Fatalf("compact endpoint's answered_later: %+v", l)
		}
		return
	}
	t.Fatalf("no compact endpoint in %s", m.Data)
}

// hungProvider never answers until its context ends.
type hungProvider struct{ started chan struct{} }

func (p *hungProvider) Name() string  { return "hung" }
func (p *hungProvider) Model() string { return "hung-1" }
func (p *hungProvider) Complete(ctx context.Context, _ llm.Request) (*llm.Response, error) {
	close(p.started)
	<-ctx.Done()
	return nil, ctx.Err()
}

// A full compaction waiting on a hung model does not hold shutdown: after
// inflightGrace it is cancelled and answered with an error, and Run returns.
func TestShutdownBoundedWithHungModel(t *testing.T) {
	defer func(g time.Duration) { inflightGrace = g }(inflightGrace)
	inflightGrace = 300 * time.Millisecond
	p := &hungProvider{started: make(chan struct{})}
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, p }})
	e.publish("s1", conversation(3, 200)...)
	type answer struct {
		r   *events.CompactReply
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		r, err := e.tryCompact("s1", nil)
		answered <- answer{r, err}
	}()
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the full compaction never reached the model")
	}
	start := time.Now()
	if err := e.stopRun(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if took := time.Since(start); took > inflightGrace+lifecycle.DrainTimeout+time.Second {
		t.Fatalf("shutdown took %v with a hung model", took)
	}
	select {
	case a := <-answered:
		if a.err != nil || a.r.Served {
			t.Fatalf("the cancelled compaction was answered %+v, %v; want a reply that says it was not served", a.r, a.err)
		}
		t.Logf("answered %q: %s", a.r.Outcome, a.r.Reason)
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled compaction was never answered")
	}
}

// The tail cache changes nothing but the reads: a compactor with it and one
// without answer the same compactions of a session that keeps growing, with
// other sessions interleaved, the window growing back and the notes moving.
func TestTailCacheAnswersAlike(t *testing.T) {
	hitsBefore := TailCacheHits()
	cached := startEnv(t, envOptions{config: func(c *Config) { c.TailCacheBytes = 1 << 20 }})
	plain := startEnv(t, envOptions{config: func(c *Config) { c.TailCacheBytes = -1 }})
	type step struct {
		turns, size int
		summarize   int // index of the record the notes cover, -1: unchanged
	}
	steps := []step{{6, 3000, 15}, {1, 100, -1}, {2, 2000, -1}, {3, 500, 27}, {0, 0, -1}}
	var uuids [2][]string
	var seqs [2][]uint64
	for n, st := range steps {
		recs := conversation(st.turns, st.size)
		var replies [2]*events.CompactReply
		for i, e := range []*env{cached, plain} {
			e.publish("other", conversation(1, 50)...)
			if len(recs) > 0 {
				u, s := e.publish("s1", recs...)
				uuids[i], seqs[i] = append(uuids[i], u...), append(seqs[i], s...)
			}
			if st.summarize >= 0 {
				at := st.summarize
				e.putMemory("s1", events.MemoryRecord{Notes: notes(fmt.Sprint("step ", n)), LastSummarizedID: uuids[i][at], LastSummarizedSeq: seqs[i][at], CoveredSeq: seqs[i][at]})
			}
			replies[i] = e.compact("s1", events.CompactRequest{Trigger: events.TriggerManual})
		}
		a, b := replies[0], replies[1]
		if a.Outcome != b.Outcome || a.TokensAfter != b.TokensAfter || a.KeptCount != b.KeptCount || fmt.Sprint(keptUUIDs(t, a)) != fmt.Sprint(keptUUIDs(t, b)) {
			t.Fatalf("step %d: with the cache %s kept %d (%d tokens), without %s kept %d (%d tokens)", n, a.Outcome, a.KeptCount, a.TokensAfter, b.Outcome, b.KeptCount, b.TokensAfter)
		}
		if last := uuids[0][len(uuids[0])-1]; keptUUIDs(t, a)[a.KeptCount-1] != last {
			t.Fatalf("step %d: the newest record %s is not kept", n, last)
		}
	}
	// Every compaction after the first of each notes position read its
	// tail from the cache (steps 1, 2 and 4).
	if hits := TailCacheHits() - hitsBefore; hits < 3 {
		t.Fatalf("%d compactions read their tail from the cache, want at least 3", hits)
	}
}

func TestTailCacheEvictsByBytes(t *testing.T) {
	c := newTailCache(3000) // room for about two one-record entries
	rec := func(seq uint64) []transcript.Record {
		e := event.New()
		_ = e.SetData(event.ApplicationJSON, []byte(`{"text":"`+strings.Repeat("x", 400)+`"}`))
		return []transcript.Record{{Seq: seq, Event: e}}
	}
	c.put("a", 1, rec(1))
	c.put("b", 2, rec(2))
	if _, ok := c.get("a"); !ok { // a is now the most recent
		t.Fatal("a evicted too early")
	}
	c.put("c", 3, rec(3))
	if _, ok := c.get("b"); ok {
		t.Fatal("b, the least recently used, should have been evicted")
	}
	if _, ok := c.get("a"); !ok {
		t.Fatal("a was evicted")
	}
	c.put("a", 2, rec(5)) // a read from seq 2 on extends a, keeping its older record
	e, _ := c.get("a")
	if e.lowest != 1 || len(e.recs) != 2 || e.next() != 6 {
		t.Fatalf("merged entry lowest %d, %d records, next %d", e.lowest, len(e.recs), e.next())
	}
	if recs, ok := e.between(2, 5); !ok || len(recs) != 1 || recs[0].Seq != 5 {
		t.Fatalf("between 2 and 5: %v %v", recs, ok)
	}
	if _, ok := e.from(0); ok {
		t.Fatal("an entry must not claim records below its lowest sequence")
	}
	if _, ok := e.between(2, 6); ok {
		t.Fatal("an entry must not claim records after its newest one")
	}
	// A read from seq 9 on does not reach the entry (6-8 were never read):
	// the older records are dropped rather than claimed contiguous.
	c.put("a", 9, rec(9))
	if e, _ = c.get("a"); e.lowest != 9 || len(e.recs) != 1 {
		t.Fatalf("entry after a gap: lowest %d, %d records; want 9 and 1", e.lowest, len(e.recs))
	}
}

// A compaction whose notes moved past records the cache never read (stored
// after the cached tail, before the new lastSummarizedSeq) keeps them when its
// window grows back over them, as a compactor without the cache does.
func TestTailCacheGapAfterNotesMove(t *testing.T) {
	cached := startEnv(t, envOptions{config: func(c *Config) { c.TailCacheBytes = 1 << 20 }})
	plain := startEnv(t, envOptions{config: func(c *Config) { c.TailCacheBytes = -1 }})
	var kept [2][]string
	for i, e := range []*env{cached, plain} {
		u, s := e.publish("s1", conversation(4, 400)...)
		e.putMemory("s1", events.MemoryRecord{Notes: notes("first"), LastSummarizedID: u[3], LastSummarizedSeq: s[3], CoveredSeq: s[3]})
		e.compact("s1", events.CompactRequest{Trigger: events.TriggerManual}) // fills the cache up to the newest record
		u2, s2 := e.publish("s1", conversation(2, 400)...)
		last := len(u2) - 1
		e.putMemory("s1", events.MemoryRecord{Notes: notes("second"), LastSummarizedID: u2[last], LastSummarizedSeq: s2[last], CoveredSeq: s2[last]})
		r := e.compact("s1", events.CompactRequest{Trigger: events.TriggerManual})
		if !r.Served {
			t.Fatalf("not served: %s %s", r.Outcome, r.Reason)
		}
		kept[i] = keptUUIDs(t, r)
		for _, want := range u2[:last] {
			if !slices.Contains(kept[i], want) {
				t.Fatalf("env %d: record %s, stored after the cached tail and before the notes, is not kept: %v", i, want, kept[i])
			}
		}
	}
	if fmt.Sprint(kept[0]) != fmt.Sprint(kept[1]) {
		t.Fatalf("with the cache kept %v, without %v", kept[0], kept[1])
	}
}
