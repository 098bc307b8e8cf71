package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// TestManualExtractionEndToEnd runs a manual extraction through the HTTP edge,
// the trigger's endpoint and a real extractor: a session below every
// threshold gets its memory on request, and an empty session is told there is
// nothing to summarize.
func TestManualExtractionEndToEnd(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	batch := []map[string]any{
		message("small", "u1", events.RoleUser, "", events.Block{Type: events.BlockText, Text: "Rename the flag to --monthly."}),
		message("small", "a1", events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "Renamed; tests pass."}),
	}
	body, _ := json.Marshal(batch)
	resp, err := http.Post(p.httpURL+"/v1/events", "application/cloudevents-batch+json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ingest answered %d", resp.StatusCode)
	}

	extract := func(session string) events.ExtractResult {
		t.Helper()
		resp, err := http.Post(p.httpURL+"/v1/sessions/"+session+"/extract", "application/json", strings.NewReader(`{"timeout_ms": 20000}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var res events.ExtractResult
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &res) != nil {
			t.Fatalf("extract %s answered %d: %s", session, resp.StatusCode, b)
		}
		return res
	}
	res := extract("small")
	if !res.Success || res.MemoryKey != events.MemoryKey("default", "small") {
		t.Fatalf("manual extraction: %+v", res)
	}
	kv, err := js.KeyValue(context.Background(), events.BucketMemory)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := kv.Get(context.Background(), res.MemoryKey)
	if err != nil {
		t.Fatalf("no memory after a successful manual extraction: %v", err)
	}
	var rec events.MemoryRecord
	if err := json.Unmarshal(entry.Value(), &rec); err != nil || !strings.Contains(rec.Notes, "--monthly") || rec.CoveredSeq == 0 {
		t.Fatalf("memory record: covered %d, err %v, notes:\n%s", rec.CoveredSeq, err, rec.Notes)
	}

	// Nothing to summarize is a problem, not a 200 with success false.
	resp, err = http.Post(p.httpURL+"/v1/sessions/nobody/extract", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || resp.Header.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(strings.ToLower(string(b)), "no messages to summarize") {
		t.Fatalf("empty session: %d %s", resp.StatusCode, b)
	}
}
