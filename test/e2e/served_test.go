package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// postBatch posts CloudEvents as one batch and fails unless they are stored.
func postBatch(t *testing.T, url string, evs []map[string]any) {
	t.Helper()
	body, _ := json.Marshal(evs)
	resp, err := http.Post(url+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("ingest answered %d: %.300s", resp.StatusCode, msg)
	}
}

// compactWith asks the HTTP edge for a compaction with the given request body.
func compactWith(t *testing.T, url, session, body string) *events.CompactReply {
	t.Helper()
	return postFor[events.CompactReply](t, url+"/v1/sessions/"+session+"/compact", body)
}

// postFor POSTs a JSON body and decodes a 200 answer into a T; any other
// answer fails the test.
func postFor[T any](t *testing.T, url, body string) *T {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r T
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
		t.Fatalf("%s answered %d: %.300s", url, resp.StatusCode, b)
	}
	return &r
}

// servedMessages is the context a served reply hands the platform: the
// summary message, then the kept records' messages.
func servedMessages(t *testing.T, r *events.CompactReply) []*events.Message {
	t.Helper()
	msgs := []*events.Message{&r.Summary.Message}
	for _, m := range contextOf(t, r).kept {
		msgs = append(msgs, &m)
	}
	return msgs
}

// sessionStream is the transcript shard stream that holds a session of
// tenant (the layout read from the server) and the session's subject in it.
func sessionStream(t *testing.T, js jetstream.JetStream, tenant, session string) (jetstream.Stream, string) {
	t.Helper()
	ctx := context.Background()
	layout, err := provision.DiscoverLayout(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := js.Stream(ctx, layout.Stream(tenant, session))
	if err != nil {
		t.Fatal(err)
	}
	return ts, layout.Subject(tenant, session)
}

// lastSeq is the session's newest transcript sequence (in its shard
// stream).
func lastSeq(t *testing.T, js jetstream.JetStream, session string) uint64 {
	t.Helper()
	ts, subject := sessionStream(t, js, "default", session)
	m, err := ts.GetLastMsgForSubject(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	return m.Sequence
}

// TestOrphanedToolCallIsServedValid: the agent died in a tool call and the
// user carried on two turns later. The compaction keeps that tool_use; the
// Messages API rejects a tool_use not answered in the next user turn, so
// Recall answers it with a synthetic interrupted result and says so.
func TestOrphanedToolCallIsServedValid(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	const session = "orphan"
	var evs []map[string]any
	for i := range 3 {
		evs = append(evs, workTurn(session, fmt.Sprint("w", i), fmt.Sprintf("step %d of the parser", i))...)
	}
	postBatch(t, p.httpURL, evs)
	waitForNotes(t, js, session, lastSeq(t, js, session))
	postBatch(t, p.httpURL, []map[string]any{
		message(session, "crash-u", events.RoleUser, "", events.Block{Type: events.BlockText, Text: "run the full test suite"}),
		message(session, "crash-a", events.RoleAssistant, "tool_use", events.Block{Type: events.BlockToolUse, ID: "t-crash", Name: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`)}),
		// The agent died here; the platform restarted it without a result.
		message(session, "back-u", events.RoleUser, "", events.Block{Type: events.BlockText, Text: "you stopped — where were we?"}),
		message(session, "back-a", events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "We were running the tests."}),
		message(session, "last-u", events.RoleUser, "", events.Block{Type: events.BlockText, Text: "keep the retry limit at 3"}),
	})
	r := compactWith(t, p.httpURL, session, `{"wait_timeout_ms": 15000}`)
	if !r.Served {
		t.Fatalf("not served: %s (%s)", r.Outcome, r.Reason)
	}
	if err := memory.ValidateContext(servedMessages(t, r)); err != nil {
		t.Fatalf("served context invalid: %v", err)
	}
	synthetic := 0
	for _, e := range r.Kept {
		if e.Extensions()[events.ExtSynthetic] == events.SyntheticInterrupted {
			synthetic++
			if e.Subject() != session || e.Extensions()[events.ExtTenant] != "default" || e.Extensions()[events.ExtSeq] != nil {
				t.Fatalf("synthetic record %s: subject %q, tenant %v, seq %v", e.ID(), e.Subject(), e.Extensions()[events.ExtTenant], e.Extensions()[events.ExtSeq])
			}
		}
	}
	c := contextOf(t, r)
	crash := -1
	for i, m := range c.kept {
		if m.UUID == "crash-a" {
			crash = i
		}
	}
	if crash < 0 {
		t.Fatalf("the orphaned call is not kept (%d kept): nothing to repair, the test proves nothing", len(c.kept))
	}
	next := c.kept[crash+1].Content[0]
	if synthetic != 1 || next.Type != events.BlockToolResult || next.ToolUseID != "t-crash" || !next.IsError || len(r.Repaired) == 0 {
		t.Fatalf("want one synthetic interrupted result right after the orphan; got %d synthetic, next block %+v, repaired %+v", synthetic, next, r.Repaired)
	}
	// A preview is checked at the same boundary.
	pv := compactWith(t, p.httpURL, session, `{"preview": true}`)
	if err := memory.ValidateContext(servedMessages(t, pv)); !pv.Served || err != nil {
		t.Fatalf("preview: served %v, %v", pv.Served, err)
	}
}

// TestHugeLatestRequestServedBelowThreshold: the latest request is a
// 60,000-token pasted log and the platform compacts with a 67,000-token
// threshold. The compaction is served below that threshold, with the request
// quoted by its beginning and end and naming its record.
func TestHugeLatestRequestServedBelowThreshold(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	const session = "paste"
	var evs []map[string]any
	for i := range 3 {
		evs = append(evs, workTurn(session, fmt.Sprint("w", i), fmt.Sprintf("step %d of the importer", i))...)
	}
	postBatch(t, p.httpURL, evs)
	waitForNotes(t, js, session, lastSeq(t, js, session))
	paste := "PASTE-BEGIN why does the import fail?\n" + strings.Repeat("2026-11-25T10:00:00Z ERROR importer: row 1812: invalid date \"31/02\"\n", 3600) + "PASTE-END"
	postBatch(t, p.httpURL, []map[string]any{message(session, "paste-u", events.RoleUser, "", events.Block{Type: events.BlockText, Text: paste})})

	r := compactWith(t, p.httpURL, session, `{"wait_timeout_ms": 0, "auto_compact_threshold": 67000}`)
	if !r.Served || r.TokensAfter >= 67000 {
		t.Fatalf("want served below 67,000 tokens: %s served=%v at %d (%s)", r.Outcome, r.Served, r.TokensAfter, r.Reason)
	}
	c := contextOf(t, r)
	for _, m := range c.kept {
		if m.UUID == "paste-u" {
			t.Fatal("the 60,000-token request was kept whole, over the keep window")
		}
	}
	if !strings.Contains(c.summary, "PASTE-BEGIN") || !strings.Contains(c.summary, "PASTE-END") || !strings.Contains(c.summary, "record paste-u (seq ") {
		t.Fatalf("the request is not quoted by its beginning and end with its record:\n%.400s", c.summary)
	}
	if q := memory.EstimateText(c.summary); q > 20000 {
		t.Fatalf("summary of %d tokens: the quote is not bounded", q)
	}
	if err := memory.ValidateContext(servedMessages(t, r)); err != nil {
		t.Fatal(err)
	}
}
