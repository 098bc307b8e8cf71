package extractorsvc

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/microapi"
	"github.com/recallhq/recall/internal/parked"
	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/chunked"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/extractor/extractorsvc/extractortest"
)

func TestExtractCommitsAndClearsStatus(t *testing.T) {
	e := newEnv(t)
	var sawStatus atomic.Bool
	p := &extractortest.EditProvider{Fail: func(llm.Request) error {
		sawStatus.Store(e.statusExists(t, "acme", "s1"))
		return nil
	}}
	e.startWorker(t, testConfig("w1"), p)
	seqs := e.appendMessages(t, "acme", "s1", 4)
	e.request(t, "acme", "s1", seqs[3])

	testpoll.Until(t, 10*time.Second, "extraction.completed", func() bool { return len(e.completed()) == 1 })
	c := e.completed()[0]
	if c.Skipped || c.UpToSeq != seqs[3] || c.CoveredSeq != seqs[3] || c.Worker != "w1" || c.Revision == 0 {
		t.Fatalf("completed = %+v", c)
	}
	rec, rev := e.memory(t, "acme", "s1")
	if rev != c.Revision || rec.CoveredSeq != seqs[3] || rec.LastSummarizedSeq != seqs[3] || rec.Extractions != 1 {
		t.Fatalf("memory rev %d = %+v", rev, rec)
	}
	if !strings.Contains(rec.Notes, "- step 1") || !strings.HasPrefix(rec.Notes, "# Session Title") {
		t.Fatalf("notes were not edited:\n%s", rec.Notes)
	}
	if rec.Usage.InputTokens == 0 || rec.Provider != "test" || rec.Model != "edit-1" {
		t.Fatalf("usage/provider not recorded: %+v", rec)
	}
	if !sawStatus.Load() {
		t.Fatal("no status record while the extraction ran")
	}
	testpoll.Until(t, 5*time.Second, "status cleared", func() bool { return !e.statusExists(t, "acme", "s1") })
}

func TestCoveredRequestCostsNoLLMCall(t *testing.T) {
	e := newEnv(t)
	p := extractortest.NewDetector(&extractortest.EditProvider{})
	e.startWorker(t, testConfig("w1"), p)
	seqs := e.appendMessages(t, "acme", "s1", 6)
	e.request(t, "acme", "s1", seqs[5])
	testpoll.Until(t, 10*time.Second, "first extraction", func() bool { return len(e.completed()) == 1 })
	calls := p.Total()
	if calls == 0 {
		t.Fatal("no LLM call for the first request")
	}
	e.request(t, "acme", "s1", seqs[3])   // older than coveredSeq
	e.request(t, "acme", "s1", seqs[5]+0) // same: deduplicated by the stream
	testpoll.Until(t, 10*time.Second, "covered request", func() bool { return len(e.completed()) == 2 })
	c := e.completed()[1]
	if !c.Skipped || c.UpToSeq != seqs[3] || c.CoveredSeq != seqs[5] {
		t.Fatalf("covered request: %+v", c)
	}
	if p.Total() != calls {
		t.Fatalf("covered request cost %d LLM calls", p.Total()-calls)
	}
}

func TestPendingRequestsOneExtraction(t *testing.T) {
	e := newEnv(t)
	p := extractortest.NewDetector(&extractortest.EditProvider{})
	seqs := e.appendMessages(t, "acme", "s1", 6)
	for _, i := range []int{1, 3, 5} {
		e.request(t, "acme", "s1", seqs[i])
	}
	e.startWorker(t, testConfig("w1"), p)
	testpoll.Until(t, 10*time.Second, "three completions", func() bool { return len(e.completed()) == 3 })
	rec, _ := e.memory(t, "acme", "s1")
	if rec.Extractions != 1 || rec.CoveredSeq != seqs[5] {
		t.Fatalf("memory after three pending requests: extractions %d covered %d, want 1 and %d", rec.Extractions, rec.CoveredSeq, seqs[5])
	}
	skipped := 0
	for _, c := range e.completed() {
		if c.Skipped {
			skipped++
		}
	}
	if skipped != 2 {
		t.Fatalf("%d skipped completions, want 2: %+v", skipped, e.completed())
	}
}

func TestFailureParksClearsStatusAndReplays(t *testing.T) {
	e := newEnv(t)
	var broken atomic.Bool
	broken.Store(true)
	var sawStatus atomic.Bool
	p := &extractortest.EditProvider{Fail: func(llm.Request) error {
		sawStatus.Store(e.statusExists(t, "acme", "s1"))
		if broken.Load() {
			return extractortest.ErrMalformedEdit
		}
		return nil
	}}
	e.startWorker(t, testConfig("w1"), p)
	seqs := e.appendMessages(t, "acme", "s1", 4)
	e.request(t, "acme", "s1", seqs[3])

	testpoll.Until(t, 10*time.Second, "extraction.failed", func() bool { return len(e.failed()) == 1 })
	f := e.failed()[0]
	if !f.Parked || f.Reason != ReasonNoValidToolCall || f.Attempts < 1 || f.UpToSeq != seqs[3] {
		t.Fatalf("failed = %+v", f)
	}
	if !sawStatus.Load() {
		t.Fatal("no status record while the extraction ran")
	}
	// The reference leaves the flag set after a failure; Recall clears it.
	testpoll.Until(t, 5*time.Second, "status cleared after failure", func() bool { return !e.statusExists(t, "acme", "s1") })
	ctx := context.Background()
	list, err := parked.List(ctx, e.js)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Key != parked.Key("acme", "s1", seqs[3]) || list[0].Reason != ReasonNoValidToolCall || list[0].Request.UpToSeq != seqs[3] {
		t.Fatalf("parked = %+v", list)
	}
	if rec, rev := e.memory(t, "acme", "s1"); rev != 0 {
		t.Fatalf("a failed extraction wrote memory: %+v", rec)
	}
	// The queue is empty: nothing is redelivered.
	st, _ := e.js.Stream(ctx, events.StreamExtract)
	if info, _ := st.Info(ctx); info.State.Msgs != 0 {
		t.Fatalf("%d messages left in the work queue", info.State.Msgs)
	}

	broken.Store(false)
	n, err := parked.Replay(ctx, e.js, Component, parked.Filter{Session: "other"})
	if err != nil || n != 0 {
		t.Fatalf("replay of another session: %d, %v", n, err)
	}
	n, err = parked.Replay(ctx, e.js, Component, parked.Filter{Tenant: "acme", Session: "s1"})
	if err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	testpoll.Until(t, 10*time.Second, "replayed extraction completed", func() bool { return len(e.completed()) == 1 })
	if c := e.completed()[0]; c.Skipped || c.CoveredSeq != seqs[3] {
		t.Fatalf("replayed: %+v", c)
	}
	if list, _ := parked.List(ctx, e.js); len(list) != 0 {
		t.Fatalf("still parked after replay: %+v", list)
	}
}

func TestProviderErrorIsParked(t *testing.T) {
	e := newEnv(t)
	p := &extractortest.EditProvider{Fail: func(llm.Request) error {
		return &llm.AttemptsError{Attempts: 3, Err: llm.ErrRetryable}
	}}
	e.startWorker(t, testConfig("w1"), p)
	seqs := e.appendMessages(t, "acme", "s1", 2)
	e.request(t, "acme", "s1", seqs[1])
	testpoll.Until(t, 10*time.Second, "extraction.failed", func() bool { return len(e.failed()) == 1 })
	if f := e.failed()[0]; f.Reason != ReasonProvider || f.Attempts != 3 || !f.Parked {
		t.Fatalf("failed = %+v", f)
	}
	testpoll.Until(t, 5*time.Second, "status cleared after failure", func() bool { return !e.statusExists(t, "acme", "s1") })
}

// A zombie — a worker that lost the session but still finished its LLM
// call — commits first. The fenced commit discards the result that was based
// on the older revision instead of merging it.
func TestFencedCommitDiscardsTheLoser(t *testing.T) {
	e := newEnv(t)
	seqs := e.appendMessages(t, "acme", "s1", 6)
	kv, _ := e.js.KeyValue(context.Background(), events.BucketMemory)
	var once sync.Once
	zombie := func(session string, covered uint64) func(llm.Request) error {
		return func(llm.Request) error {
			once.Do(func() {
				b, _ := json.Marshal(events.MemoryRecord{Notes: "ZOMBIE NOTES", CoveredSeq: covered, Extractions: 7})
				if _, err := kv.Put(context.Background(), events.MemoryKey("acme", session), b); err != nil {
					t.Error(err)
				}
			})
			return nil
		}
	}
	t.Run("zombie covered the request", func(t *testing.T) {
		p := extractortest.NewDetector(&extractortest.EditProvider{Fail: zombie("s1", seqs[5])})
		w := e.startWorker(t, testConfig("w1"), p)
		e.request(t, "acme", "s1", seqs[3])
		testpoll.Until(t, 10*time.Second, "completion", func() bool { return len(e.completed()) == 1 })
		w.stop(t)
		rec, _ := e.memory(t, "acme", "s1")
		if rec.Notes != "ZOMBIE NOTES" || rec.Extractions != 7 || rec.CoveredSeq != seqs[5] {
			t.Fatalf("the losing result was written or merged: %+v", rec)
		}
		if c := e.completed()[0]; !c.Skipped {
			t.Fatalf("completion after a lost commit must be the covered one: %+v", c)
		}
	})
	t.Run("zombie did not cover it", func(t *testing.T) {
		once = sync.Once{}
		seqs := e.appendMessages(t, "acme", "s2", 6)
		p := extractortest.NewDetector(&extractortest.EditProvider{Fail: zombie("s2", seqs[1])})
		e.startWorker(t, testConfig("w2"), p)
		e.request(t, "acme", "s2", seqs[5])
		testpoll.Until(t, 10*time.Second, "completion", func() bool { return len(e.completed()) == 2 })
		rec, _ := e.memory(t, "acme", "s2")
		// Redelivered and redone on top of the zombie's notes.
		if !strings.HasPrefix(rec.Notes, "ZOMBIE NOTES") || rec.Extractions != 8 || rec.CoveredSeq != seqs[5] {
			t.Fatalf("memory = %+v", rec)
		}
		if c := e.completed()[1]; c.Skipped || c.CoveredSeq != seqs[5] {
			t.Fatalf("completion: %+v", c)
		}
	})
}

func TestMemoryEndpoint(t *testing.T) {
	e := newEnv(t)
	kv, _ := e.js.KeyValue(context.Background(), events.BucketMemory)
	svc, err := serveMemoryAPI(microapi.NewLater(context.Background(), e.nc, slog.Default(), 0), kv)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	big := strings.Repeat("x", 1045000) // fits a KV put; the reply needs chunks
	b, _ := json.Marshal(events.MemoryRecord{Notes: big, CoveredSeq: 9})
	rev, err := kv.Put(context.Background(), events.MemoryKey("acme", "s1"), b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := chunked.Request(ctx, e.nc, events.APISubject(events.VerbMemory, "acme", "s1"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r events.MemoryReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Key != "acme.s1" || r.Revision != rev || r.Record.CoveredSeq != 9 || len(r.Record.Notes) != len(big) {
		t.Fatalf("reply: key %q rev %d covered %d notes %d", r.Key, r.Revision, r.Record.CoveredSeq, len(r.Record.Notes))
	}
	m, err = chunked.Request(ctx, e.nc, events.APISubject(events.VerbMemory, "acme", "nope"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "404" {
		t.Fatalf("unknown session: code %q", code)
	}
}

func TestRunServesAndStopsCleanly(t *testing.T) {
	e := newEnv(t)
	cfg := testConfig("svc1")
	cfg.NATS.URL = e.srv.ClientURL()
	cfg.Provider = &extractortest.EditProvider{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, e.log) }()
	seqs := e.appendMessages(t, "acme", "s1", 2)
	e.request(t, "acme", "s1", seqs[1])
	testpoll.Until(t, 15*time.Second, "extraction through Run", func() bool { return len(e.completed()) == 1 })
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer rcancel()
	m, err := chunked.Request(rctx, e.nc, events.APISubject(events.VerbMemory, "acme", "s1"), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var r events.MemoryReply
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Record.CoveredSeq != seqs[1] {
		t.Fatalf("memory reply %s: %v", m.Data, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	// It left the group: its membership key is gone at once.
	kv, _ := e.js.KeyValue(context.Background(), events.BucketWorkers)
	if _, err := kv.Get(context.Background(), "svc1"); err == nil {
		t.Fatal("membership key still present after a clean stop")
	}
}

// A request beyond the stored transcript must not move coveredSeq past what
// was read: it is retried and finally parked.
func TestRequestBeyondTranscriptIsNotCovered(t *testing.T) {
	e := newEnv(t)
	p := extractortest.NewDetector(&extractortest.EditProvider{})
	e.startWorker(t, testConfig("w1"), p)
	seqs := e.appendMessages(t, "acme", "s1", 2)
	e.request(t, "acme", "s1", seqs[1]+100)
	testpoll.Until(t, 30*time.Second, "parked after retries", func() bool { return len(e.failed()) == 1 })
	if f := e.failed()[0]; f.Reason != ReasonInfrastructure || f.Attempts != 3 {
		t.Fatalf("failed = %+v", f)
	}
	if rec, rev := e.memory(t, "acme", "s1"); rev != 0 {
		t.Fatalf("memory written for an unreadable range: %+v", rec)
	}
	if p.Total() != 0 {
		t.Fatalf("%d LLM calls for an unreadable range", p.Total())
	}
}

// textProvider answers every call with text and no tool call: the model
// found nothing to change.
type textProvider struct{ calls atomic.Int32 }

func (p *textProvider) Name() string  { return "test" }
func (p *textProvider) Model() string { return "text-1" }
func (p *textProvider) Complete(context.Context, llm.Request) (*llm.Response, error) {
	p.calls.Add(1)
	return &llm.Response{Text: "The notes are already up to date.", StopReason: "end_turn", Model: "text-1"}, nil
}

// "Nothing to change" is a success: coverage advances, the notes stay, the
// completion says no edits, nothing is parked and the model is asked once.
func TestNothingToChangeCompletes(t *testing.T) {
	e := newEnv(t)
	p := &textProvider{}
	e.startWorker(t, testConfig("w1"), p)
	seqs := e.appendMessages(t, "acme", "s1", 4)
	e.request(t, "acme", "s1", seqs[3])

	testpoll.Until(t, 10*time.Second, "extraction.completed", func() bool { return len(e.completed()) == 1 })
	c := e.completed()[0]
	if c.Edits != 0 || !c.UpToDate || c.CoveredSeq != seqs[3] || c.LastSummarizedSeq != seqs[3] {
		t.Fatalf("completed = %+v, want no edits, up to date, covered to %d", c, seqs[3])
	}
	if len(e.failed()) != 0 || p.calls.Load() != 1 {
		t.Fatalf("%d failures, %d model calls", len(e.failed()), p.calls.Load())
	}
	if rec, _ := e.memory(t, "acme", "s1"); rec.CoveredSeq != seqs[3] {
		t.Fatalf("coverage %d, want %d", rec.CoveredSeq, seqs[3])
	}
}

// A long session is read from the window its last extraction kept
// (MemoryRecord.ContextSeq) instead of from its first record, and the model
// is shown the conversation a read of the whole transcript gives.
func TestLongSessionReadFromItsWindow(t *testing.T) {
	e := newEnv(t)
	rec, cfg := e.startRecordedWorker(t, 80)
	seqs, first := e.cutWindow(t)
	if first.ContextSeq > seqs[49] {
		t.Fatalf("context_seq %d after a capped extraction of records %d..%d", first.ContextSeq, seqs[0], seqs[49])
	}

	more := e.appendMessages(t, "acme", "s1", 10)
	e.request(t, "acme", "s1", more[9])
	testpoll.Until(t, 10*time.Second, "the third extraction", func() bool { return len(e.completed()) == 3 })
	recs, err := transcript.NewReader(e.nc, e.layout).Read(context.Background(), "acme", "s1", 1, more[9], 0)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.Message
	summarized := -1
	for i, r := range recs {
		msgs = append(msgs, *r.Message)
		if r.Seq <= first.LastSummarizedSeq {
			summarized = i
		}
	}
	want := extraction.String(extraction.BuildConversation(msgs, summarized, cfg.MaxConversationTokens))
	convs := rec.all()
	if got := convs[len(convs)-1]; got != want {
		t.Fatalf("read from seq %d the model saw\n%s\nthe whole transcript gives\n%s", first.ContextSeq, convs[len(convs)-1], want)
	}
	if second, _ := e.memory(t, "acme", "s1"); second.ContextSeq < first.ContextSeq {
		t.Fatalf("the window moved back: %d then %d", first.ContextSeq, second.ContextSeq)
	}
}

// A backlog over the conversation cap (nothing summarized yet, 40 messages
// against a cap of a few of them) is summarized in parts, oldest first,
// each committed, in one request: every model call gets a part of the
// backlog, the last covers the request, and one completion is announced.
func TestBacklogSummarizedInParts(t *testing.T) {
	e := newEnv(t)
	rec, _ := e.startRecordedWorker(t, 80)
	seqs := e.appendMessages(t, "acme", "s1", 40)
	e.request(t, "acme", "s1", seqs[39])
	testpoll.Until(t, 20*time.Second, "the extraction", func() bool { return len(e.completed()) == 1 })
	c := e.completed()[0]
	mem, _ := e.memory(t, "acme", "s1")
	if c.CoveredSeq != seqs[39] || mem.CoveredSeq != seqs[39] || mem.LastSummarizedSeq != seqs[39] {
		t.Fatalf("completed %+v, memory %+v", c, mem)
	}
	convs := rec.all()
	if len(convs) < 4 || mem.Extractions != len(convs) {
		t.Fatalf("%d model calls, %d extractions committed, for a backlog of 40 messages with a cap of 80 tokens", len(convs), mem.Extractions)
	}
	if strings.Contains(convs[0], "message 39") || !strings.Contains(convs[len(convs)-1], "message 39") {
		t.Fatalf("the first part already held the newest message, or the last did not:\nfirst %s\nlast %s", convs[0], convs[len(convs)-1])
	}
}

// cutWindow runs two extractions of session acme/s1 (40 messages, then 10
// more) on a worker with a small conversation cap: nothing is dropped
// before something is summarized, so the second one cuts and keeps a
// window. It returns the 50 records' sequences and the memory record.
func (e *env) cutWindow(t *testing.T) ([]uint64, events.MemoryRecord) {
	t.Helper()
	seqs := e.appendMessages(t, "acme", "s1", 40)
	e.request(t, "acme", "s1", seqs[39])
	testpoll.Until(t, 10*time.Second, "the first extraction", func() bool { return len(e.completed()) == 1 })
	seqs = append(seqs, e.appendMessages(t, "acme", "s1", 10)...)
	e.request(t, "acme", "s1", seqs[49])
	testpoll.Until(t, 10*time.Second, "the second extraction", func() bool { return len(e.completed()) == 2 })
	mem, _ := e.memory(t, "acme", "s1")
	if mem.ContextSeq <= seqs[0] {
		t.Fatalf("no window cut: context_seq %d, first record %d", mem.ContextSeq, seqs[0])
	}
	return seqs, mem
}

// convRecorder keeps the conversation of every model call (extraction.String).
type convRecorder struct {
	mu    sync.Mutex
	convs []string
}

func (r *convRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.convs...)
}

// startRecordedWorker starts a worker with the given conversation cap whose
// model edits the notes and records every conversation it is sent.
func (e *env) startRecordedWorker(t *testing.T, maxConversationTokens int64) (*convRecorder, Config) {
	rec := &convRecorder{}
	cfg := testConfig("w1")
	cfg.MaxConversationTokens = maxConversationTokens
	e.startWorker(t, cfg, rec.provider())
	return rec, cfg
}

// provider is a model that edits the notes and records every
// conversation it is sent in r.
func (r *convRecorder) provider() *extractortest.EditProvider {
	return &extractortest.EditProvider{Fail: func(req llm.Request) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.convs = append(r.convs, extraction.String(req.Messages[:req.CacheAfter+1]))
		return nil
	}}
}
