package compactorsvc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// notesBehind stores four turns, notes covering the first, and two more
// turns; a 500-token window cannot keep the five uncovered turns, so the
// compaction falls back. It returns the first uncovered turn's number.
func (e *env) notesBehind(session, current string) int64 {
	e.t.Helper()
	base := turnCounter.Load()
	uuids, seqs := e.publish(session, conversation(4, 200)...)
	e.putMemory(session, events.MemoryRecord{Notes: notes(current), LastSummarizedID: uuids[3], LastSummarizedSeq: seqs[3]})
	e.publish(session, conversation(2, 200)...)
	return base + 2
}

// Without a model the fallback builds the summary from the notes and the
// records they do not cover: it once served the offline provider's "The
// notes are up to date." and lost both.
func TestOfflineFullCompactKeepsNotesAndRecords(t *testing.T) {
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, llm.NewOffline() }})
	first := e.notesBehind("s1", "NOTES-MARKER: rate limiting half done.")
	r := e.compact("s1", events.CompactRequest{MaxTokens: 500})
	if r.Outcome != memory.OutcomeFullCompact || !r.Served || r.FallbackFrom != memory.OutcomeNotesBehind {
		t.Fatalf("outcome %q from %q served=%v (%s)", r.Outcome, r.FallbackFrom, r.Served, r.Reason)
	}
	summary := r.Summary.Content[0].Text
	if strings.Contains(summary, "The notes are up to date.") {
		t.Fatal("the summary is the offline provider's placeholder")
	}
	want, _ := memory.TruncateForCompact(notes("NOTES-MARKER: rate limiting half done."), memory.DefaultSectionMaxChars)
	if !strings.Contains(summary, strings.TrimSpace(want)) {
		t.Fatalf("the notes are not in the summary:\n%.2000s", summary)
	}
	// Every uncovered request before the latest (kept verbatim) is quoted.
	latest := first + 4
	for turn := first; turn < latest; turn++ {
		if !strings.Contains(summary, fmt.Sprintf("> request %d: ", turn)) {
			t.Errorf("request %d is not in the summary", turn)
		}
	}
	if !strings.Contains(summary, "→ ok") {
		t.Error("the tool calls and their outcomes are not in the summary")
	}
	if r.TokensAfter >= r.TokensBefore || r.TokensAfter >= r.Threshold {
		t.Fatalf("tokens %d -> %d (threshold %d)", r.TokensBefore, r.TokensAfter, r.Threshold)
	}
}

// When the notes alone do not fit below the threshold, nothing faithful
// fits: the compaction is not served, and the reason says why.
func TestOfflineFullCompactRefusesWhenNotesDoNotFit(t *testing.T) {
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, llm.NewOffline() }})
	e.notesBehind("s1", strings.Repeat("- a long line of notes about the rate limiter\n", 150))
	r := e.compact("s1", events.CompactRequest{MaxTokens: 500, AutoCompactThreshold: 1500})
	if r.Served || r.Outcome != memory.OutcomeNotesBehind || !strings.Contains(r.Reason, "the notes alone") {
		t.Fatalf("outcome %q served=%v: %s", r.Outcome, r.Served, r.Reason)
	}
}

// With a model, the served summary holds the notes and the model's text.
func TestModelFullCompactKeepsNotes(t *testing.T) {
	p := &fakeProvider{}
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, p }})
	e.notesBehind("s1", "NOTES-MARKER")
	r := e.compact("s1", events.CompactRequest{MaxTokens: 500})
	if r.Outcome != memory.OutcomeFullCompact || !r.Served {
		t.Fatalf("outcome %q (%s)", r.Outcome, r.Reason)
	}
	summary := r.Summary.Content[0].Text
	if !strings.Contains(summary, strings.TrimSpace(notes("NOTES-MARKER"))) || !strings.Contains(summary, "The user is adding rate limiting.") {
		t.Fatalf("summary lacks the notes or the model's text:\n%s", summary)
	}
}

// Served means below the threshold: a full compaction that would still be
// at or over it is not served.
func TestFullCompactServedBelowThreshold(t *testing.T) {
	p := &fakeProvider{}
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, p }})
	e.publish("s1", conversation(3, 200)...)
	r := e.compact("s1", events.CompactRequest{AutoCompactThreshold: 100})
	if r.Served || r.Outcome != memory.OutcomeNoSessionMemory || !strings.Contains(r.Reason, "at or over the auto-compact threshold of 100") {
		t.Fatalf("outcome %q served=%v: %s", r.Outcome, r.Served, r.Reason)
	}
	if p.calls.Load() != 1 {
		t.Fatalf("%d model calls, want 1", p.calls.Load())
	}
}

// fakeProvider answers full compactions.
type fakeProvider struct {
	calls atomic.Int32
	err   error
	mu    sync.Mutex
	last  llm.Request
}

func (p *fakeProvider) Name() string  { return "fake" }
func (p *fakeProvider) Model() string { return "fake-1" }
func (p *fakeProvider) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	p.calls.Add(1)
	p.mu.Lock()
	p.last = req
	p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	return &llm.Response{Text: "## Summary\nThe user is adding rate limiting."}, nil
}

func TestFullCompactFallback(t *testing.T) {
	p := &fakeProvider{}
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, p }})
	uuids, _ := e.publish("s1", conversation(3, 200)...)
	r := e.compact("s1", nil)
	if r.Outcome != memory.OutcomeFullCompact || !r.Served || r.FallbackFrom != memory.OutcomeNoSessionMemory {
		t.Fatalf("reply %q from %q (%s)", r.Outcome, r.FallbackFrom, r.Reason)
	}
	if !strings.Contains(r.Summary.Content[0].Text, "The user is adding rate limiting.") {
		t.Fatalf("summary %q", r.Summary.Content[0].Text)
	}
	// The latest request and what follows are kept verbatim.
	if got := keptUUIDs(t, r); fmt.Sprint(got) != fmt.Sprint(uuids[8:]) {
		t.Fatalf("kept %v, want %v", got, uuids[8:])
	}
	if n := strings.Count(p.last.Messages[0].Content[0].Text, "[user] request "); n != 2 {
		t.Errorf("the model got %d of the requests, want the 2 before the latest", n)
	}

	// Served from memory: no LLM call.
	e.putMemory("s1", events.MemoryRecord{Notes: notes("n"), LastSummarizedID: uuids[7]})
	before := p.calls.Load()
	if r := e.compact("s1", nil); r.Outcome != memory.OutcomeSessionMemory || p.calls.Load() != before {
		t.Fatalf("outcome %q, %d LLM calls", r.Outcome, p.calls.Load()-before)
	}
}

// The full-compaction fallback sees the platform's current context: the
// notes, the records the notes do not cover (even before the last boundary),
// the records the last compaction kept and what followed it — not only the
// records after the boundary.
func TestFullCompactSeesCurrentContext(t *testing.T) {
	p := &fakeProvider{}
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, p }})
	base := turnCounter.Load()
	uuids, seqs := e.publish("s1", conversation(4, 200)...) // turns base+1 … base+4
	e.putMemory("s1", events.MemoryRecord{Notes: notes("NOTES-MARKER"), LastSummarizedID: uuids[3], LastSummarizedSeq: seqs[3]})
	e.publish("s1", rec{compacted: true, keptHead: uuids[8]}) // the platform kept turns 3 and 4
	e.publish("s1", conversation(2, 200)...)                  // turns base+5, base+6

	// A 500-token window cannot hold the five uncovered turns: notes_behind.
	r := e.compact("s1", events.CompactRequest{MaxTokens: 500})
	if r.Outcome != memory.OutcomeFullCompact || r.FallbackFrom != memory.OutcomeNotesBehind {
		t.Fatalf("outcome %q from %q (%s)", r.Outcome, r.FallbackFrom, r.Reason)
	}
	sent := p.last.Messages[0].Content[0].Text
	if !strings.Contains(sent, "NOTES-MARKER") {
		t.Error("the model did not get the notes")
	}
	for turn := base + 2; turn <= base+5; turn++ {
		if !strings.Contains(sent, fmt.Sprintf("request %d:", turn)) {
			t.Errorf("the model did not get turn %d", turn)
		}
	}
	if strings.Contains(sent, fmt.Sprintf("request %d:", base+1)) {
		t.Error("the model got turn 1, which the notes cover")
	}
}

func TestFullCompactCircuitBreaker(t *testing.T) {
	p := &fakeProvider{err: errors.New("provider down")}
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, p }})
	e.publish("s1", conversation(2, 100)...)
	for i := 0; i < 5; i++ {
		r := e.compact("s1", nil)
		if r.Outcome != memory.OutcomeNoSessionMemory || r.Served {
			t.Fatalf("attempt %d: %q", i, r.Outcome)
		}
		want := "full compaction failed"
		if i >= 3 {
			want = "not tried"
		}
		if !strings.Contains(r.Reason, want) {
			t.Fatalf("attempt %d: reason %q lacks %q", i, r.Reason, want)
		}
	}
	if n := p.calls.Load(); n != 3 {
		t.Fatalf("%d LLM calls, want 3", n)
	}
	// Another session has its own breaker.
	e.publish("s2", conversation(2, 100)...)
	e.compact("s2", nil)
	if n := p.calls.Load(); n != 4 {
		t.Fatalf("s2 was not tried: %d calls", n)
	}
}

// A short session whose notes cover everything, the latest request
// included: session memory cannot reduce it, and the full-compaction
// fallback must answer (it once sliced past the latest request and
// panicked, answering 500).
func TestFullCompactWhenNotesCoverTheLatestRequest(t *testing.T) {
	p := &fakeProvider{}
	e := startEnv(t, envOptions{config: func(c *Config) { c.FullCompact, c.Provider = true, p }})
	uuids, seqs := e.publish("short", conversation(1, 10)...)
	last := len(uuids) - 1
	e.putMemory("short", events.MemoryRecord{Notes: notes("Retries with jitter."), LastSummarizedID: uuids[last], LastSummarizedSeq: seqs[last], CoveredSeq: seqs[last]})
	r, err := e.tryCompact("short", events.CompactRequest{Trigger: events.TriggerManual})
	if err != nil {
		t.Fatalf("compaction failed: %v", err)
	}
	// The summary is longer than this short context: not served.
	if r.Served || r.Outcome != memory.OutcomeNoReduction || !strings.Contains(r.Reason, "full compaction would not reduce") {
		t.Fatalf("reply %s served=%v: %s", r.Outcome, r.Served, r.Reason)
	}
}
