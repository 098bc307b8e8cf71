package compactorsvc

import (
	"fmt"
	"strings"
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
