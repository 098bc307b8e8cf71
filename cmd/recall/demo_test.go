package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/memory"
)

// TestDemo runs `recall demo --json` in-process: embedded NATS, the four
// services, the bundled transcript, a real extraction (offline provider
// unless a key is set) and a compaction served from session memory.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var buf bytes.Buffer
	if err := run(ctx, []string{"demo", "--json", "--full"}, &buf); err != nil {
		t.Fatalf("demo: %v", err)
	}
	var out demoResult
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("demo output is not one JSON object: %v\n%s", err, buf.String())
	}
	if strings.TrimSpace(out.Memory) == "" || memory.IsEmptyTemplate(out.Memory, memory.DefaultTemplate) {
		t.Fatalf("empty memory: %q", out.Memory)
	}
	c := out.Compaction
	if c.Outcome != memory.OutcomeSessionMemory || !c.Served {
		t.Fatalf("compaction outcome %q (%s)", c.Outcome, c.Reason)
	}
	if c.KeptMessages == 0 || c.KeptMessages >= out.Transcript.Events || c.TokensAfter >= c.TokensBefore {
		t.Fatalf("compaction kept %d of %d events, tokens %d -> %d", c.KeptMessages, out.Transcript.Events, c.TokensBefore, c.TokensAfter)
	}
	if len(out.Extractions) == 0 || out.MemoryInfo.Extractions == 0 {
		t.Fatalf("no extraction recorded: %+v", out.MemoryInfo)
	}
	// The latest user request is in the new context verbatim: kept, or
	// quoted in the summary when the bounded window does not reach it.
	r := out.Reply
	if r == nil || len(r.Kept) != c.KeptMessages {
		t.Fatal("--full did not include the reply")
	}
	found := false
	for _, e := range r.Kept {
		if strings.Contains(string(e.Data()), "an empty file should print nothing and exit 0") {
			found = true
		}
	}
	if !found && (r.Summary == nil || !strings.Contains(r.Summary.Content[0].Text, "an empty file should print nothing and exit 0")) {
		t.Error("the latest user request is neither kept nor quoted in the summary")
	}
}
