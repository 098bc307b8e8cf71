package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// TestContextEditing replays a 40-call tool loop through the real services
// and asks for context edits (HTTP and pkg/client) and for compactions with
// and without clearing.
func TestContextEditing(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	const session, calls = "edits", 40
	jsonl, request := toolLoopTranscript(session, calls)
	res, err := importer.ClaudeCode(bytes.NewReader(jsonl), importer.Options{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	postEvents(t, p.httpURL, res.Events)
	ts, subject := sessionStream(t, js, "default", session)
	last, err := ts.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	waitForNotes(t, js, session, last.Sequence-6)

	// The API's defaults over HTTP: the context (~85,000 tokens) is below
	// the 100,000-token trigger, so nothing is cleared.
	if r := editHTTP(t, p.httpURL, session, `{}`); len(r.Clear) != 0 || r.TokensAfter != r.TokensBefore {
		t.Fatalf("below the trigger: %d blocks cleared", len(r.Clear))
	}
	// A strategy Recall does not know is a 400 naming the known ones.
	resp, err := http.Post(p.httpURL+"/v1/sessions/"+session+"/edit", "application/json", strings.NewReader(`{"context_management":{"edits":[{"type":"clear_all"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), events.EditClearToolUses) {
		t.Fatalf("unknown strategy: %d %s", resp.StatusCode, body)
	}
	// A lower trigger through pkg/client: every result but the 3 newest.
	c, err := client.New(js, "default")
	if err != nil {
		t.Fatal(err)
	}
	req := events.EditRequest{ContextManagement: &events.ContextManagement{Edits: []events.ContextEdit{{
		Type: events.EditClearToolUses, Trigger: &events.EditAmount{Type: events.UnitInputTokens, Value: 30000}}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Edit(ctx, session, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Clear) != calls-3 || len(r.AppliedEdits) != 1 || r.AppliedEdits[0].ClearedToolUses != calls-3 {
		t.Fatalf("cleared %d blocks (%+v), want the results of %d tool uses", len(r.Clear), r.AppliedEdits, calls-3)
	}
	for i, b := range r.Clear {
		if b.Kind != events.ClearToolResult || b.ToolUseID != fmt.Sprintf("toolu_%s_%d", session, i) || !strings.Contains(b.Placeholder, b.UUID) {
			t.Fatalf("block %d: %+v", i, b)
		}
	}
	t.Logf("edit: %d -> %d tokens, %+v; first block %+v", r.TokensBefore, r.TokensAfter, r.AppliedEdits, r.Clear[0])
	if r.TokensAfter >= r.TokensBefore-30000 {
		t.Fatalf("tokens %d -> %d: too little cleared", r.TokensBefore, r.TokensAfter)
	}
	// Deterministic: the same request, the same answer.
	again, err := c.Edit(ctx, session, req)
	if err != nil || len(again.Clear) != len(r.Clear) || again.TokensAfter != r.TokensAfter {
		t.Fatalf("a second edit answered differently: %v", err)
	}

	// Compaction with clearing ends smaller than without, request and
	// pairs intact, recent results verbatim.
	plain, err := c.Compact(ctx, session, events.CompactRequest{})
	if err != nil || plain.Outcome != memory.OutcomeSessionMemory {
		t.Fatalf("plain compaction: %v %+v", err, plain)
	}
	cleared, err := c.Compact(ctx, session, events.CompactRequest{ContextManagement: &events.ContextManagement{Edits: []events.ContextEdit{{
		Type: events.EditClearToolUses, Trigger: &events.EditAmount{Type: events.UnitInputTokens, Value: 30000}}}}})
	if err != nil || cleared.Outcome != memory.OutcomeSessionMemory {
		t.Fatalf("compaction with clearing: %v %+v", err, cleared)
	}
	if cleared.TokensAfter >= plain.TokensAfter || cleared.ClearedToolUses == 0 || cleared.ClearedTokens == 0 {
		t.Fatalf("with clearing %d tokens (%d uses cleared), without %d", cleared.TokensAfter, cleared.ClearedToolUses, plain.TokensAfter)
	}
	t.Logf("compaction: %d -> %d without clearing, %d with (%d tool uses, %d tokens cleared)", plain.TokensBefore, plain.TokensAfter, cleared.TokensAfter, cleared.ClearedToolUses, cleared.ClearedTokens)
	cc := contextOf(t, cleared)
	cc.checkPairs(t)
	if !strings.Contains(cc.summary, request) {
		t.Fatal("the latest request is not quoted")
	}
	placeholders, verbatim := 0, 0
	for _, m := range cc.kept {
		for _, b := range m.Content {
			if b.Type != events.BlockToolResult {
				continue
			}
			if strings.HasPrefix(b.Content[0].Text, "[Tool result cleared by Recall") {
				placeholders++
			} else {
				verbatim++
			}
		}
	}
	if verbatim != 3 || placeholders == 0 {
		t.Fatalf("kept results: %d verbatim, %d placeholders; want the 3 newest verbatim", verbatim, placeholders)
	}
}

func editHTTP(t *testing.T, url, session, body string) *events.EditReply {
	t.Helper()
	return postFor[events.EditReply](t, url+"/v1/sessions/"+session+"/edit", body)
}
