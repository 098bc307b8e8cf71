package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/compactor/compactorsvc"
)

// TestOfflineFallbackKeepsNotes: compact, report the compaction, then a new
// request with two tool calls whose results (25,000 tokens each) pass the
// keep window, with no extraction between (two calls do not trigger one).
// Session memory cannot serve (notes_behind); without a model the fallback
// serves a summary holding the notes and the uncovered requests — it once
// served "The notes are up to date." in place of both. Through the HTTP edge
// and the compactor service, as a platform asks.
func TestOfflineFallbackKeepsNotes(t *testing.T) {
	// Full compaction on with the offline provider: what
	// RECALL_FULL_COMPACT=true gives with no API key.
	p, srv := startPipelineWith(t, func(c *compactorsvc.Config) { c.FullCompact, c.Provider = true, llm.NewOffline() })
	_, js := srv.Connect(t)
	const session = "offline-again"
	rec, compacted := compactedOnce(t, p, js, session)
	request := "Add retries with exponential backoff to the webhook client, capped at five attempts."
	correction := "Stop: the cap is three attempts, not five."
	big := strings.Repeat("webhook delivery log line with a status and a latency\n", 1900) // ~25,000 tokens
	postBatch(t, p.httpURL, []map[string]any{
		compacted,
		message(session, "u-req", events.RoleUser, "", events.Block{Type: events.BlockText, Text: request}),
		message(session, "a-read", events.RoleAssistant, "tool_use", events.Block{Type: events.BlockToolUse, ID: "t-read", Name: "Read", Input: json.RawMessage(`{"file_path":"webhook/client.go"}`)}),
		message(session, "u-read", events.RoleUser, "", events.Block{Type: events.BlockToolResult, ToolUseID: "t-read", Content: events.Content{{Type: events.BlockText, Text: big}}}),
		message(session, "a-test", events.RoleAssistant, "tool_use", events.Block{Type: events.BlockToolUse, ID: "t-test", Name: "Bash", Input: json.RawMessage(`{"command":"go test ./webhook/..."}`)}),
		message(session, "u-test", events.RoleUser, "", events.Block{Type: events.BlockToolResult, ToolUseID: "t-test", IsError: true, Content: events.Content{{Type: events.BlockText, Text: "--- FAIL: TestRetry\n" + big}}}),
		message(session, "u-fix", events.RoleUser, "", events.Block{Type: events.BlockText, Text: correction}),
	})
	last := lastSeq(t, js, session)

	r := compactWith(t, p.httpURL, session, `{"wait_timeout_ms": 0}`)
	if r.LastSummarizedSeq != rec.LastSummarizedSeq {
		t.Fatalf("an extraction ran between the compactions (%d -> %d); the test needs none", rec.LastSummarizedSeq, r.LastSummarizedSeq)
	}
	if r.LastSeq != last {
		t.Fatalf("the compaction read up to %d, want %d", r.LastSeq, last)
	}
	if r.Outcome != memory.OutcomeFullCompact || !r.Served || r.FallbackFrom != memory.OutcomeNotesBehind {
		t.Fatalf("outcome %q from %q served=%v (%s)", r.Outcome, r.FallbackFrom, r.Served, r.Reason)
	}
	summary := contextOf(t, r).summary
	notes, _ := memory.TruncateForCompact(rec.Notes, memory.DefaultSectionMaxChars)
	for _, want := range []string{strings.TrimSpace(notes), "> " + request, "Read `webhook/client.go` → ok", "Bash `go test ./webhook/...` → error: --- FAIL: TestRetry"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %.200q:\n%.3000s", want, summary)
		}
	}
	kept := contextOf(t, r).kept
	if len(kept) == 0 || memory.RequestText(&kept[0]) != correction {
		t.Errorf("the latest user message is not kept verbatim")
	}
	if r.TokensAfter >= r.TokensBefore || r.TokensAfter >= r.Threshold {
		t.Fatalf("tokens %d -> %d (threshold %d)", r.TokensBefore, r.TokensAfter, r.Threshold)
	}
	t.Logf("notes_behind -> full_compact without a model: tokens %d -> %d, summary %d tokens", r.TokensBefore, r.TokensAfter, memory.EstimateText(summary))
}

// TestOfflineNotesCountEveryCall: a 400-call tool loop arrives in ten parts,
// each extracted before the next (the extraction windows overlap); the
// offline notes end with a worklog counting all 400 calls and a workflow
// that still shows the first command.
func TestOfflineNotesCountEveryCall(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	const session = "offline-400"
	jsonl, _ := toolLoopTranscript(session, 400)
	res, err := importer.ClaudeCode(bytes.NewReader(jsonl), importer.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	ts, subject := sessionStream(t, js, "default", session)
	extractions := 0
	for evs := res.Events; len(evs) > 0; {
		n := min(len(evs), 81) // the request, then 40 calls; 40 calls after
		postEvents(t, p.httpURL, evs[:n])
		evs = evs[n:]
		last, err := ts.GetLastMsgForSubject(context.Background(), subject)
		if err != nil {
			t.Fatal(err)
		}
		rec := waitForNotes(t, js, session, last.Sequence-6)
		extractions = int(rec.Extractions)
	}
	// The agent's closing answer: no tool call, so the trigger extracts.
	postBatch(t, p.httpURL, []map[string]any{message(session, "a-done", events.RoleAssistant, "end_turn",
		events.Block{Type: events.BlockText, Text: "Every handler is migrated and its tests pass."})})
	last, err := ts.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	rec := waitForNotes(t, js, session, last.Sequence)
	_, secs := memory.Parse(rec.Notes)
	body := map[string]string{}
	for _, s := range secs {
		body[s.Header] = s.Body
	}
	if !strings.Contains(body["Worklog"], "→ Bash×400") {
		t.Errorf("the worklog does not count 400 calls:\n%s", body["Worklog"])
	}
	if !strings.Contains(body["Workflow"], "go test ./services/handler000/...") || !strings.Contains(body["Workflow"], "go test ./services/handler399/...") {
		t.Errorf("the workflow lost its first or last command:\n%s", body["Workflow"])
	}
	if r := memory.SizeReminders(rec.Notes); r != "" {
		t.Errorf("notes over budget: %s", r)
	}
	t.Logf("%d extractions (%d before the closing answer); worklog:\n%s", rec.Extractions, extractions, body["Worklog"])
	if extractions < 10 {
		t.Errorf("%d extractions, want at least one per part", extractions)
	}
}
