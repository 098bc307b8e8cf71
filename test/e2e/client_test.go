package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
)

// TestGoClientRequestReply drives the request-reply API through pkg/client
// against the real services: extract, memory, compact and edit, and the
// typed refusals (no records: 422, no memory: 404, a bad request: 400).
func TestGoClientRequestReply(t *testing.T) {
	p, srv := startPipeline(t)
	_, js := srv.Connect(t)
	c, err := client.New(js, "default")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	post(t, p.httpURL+"/v1/events", "application/cloudevents-batch+json", []map[string]any{
		message("cl", "u1", events.RoleUser, "", events.Block{Type: events.BlockText, Text: "Pin the linter to v1.64 in CI."}),
		message("cl", "a1", events.RoleAssistant, "end_turn", events.Block{Type: events.BlockText, Text: "Pinned golangci-lint to v1.64."}),
	}, http.StatusAccepted)

	code := func(err error) string {
		var se *client.ServiceError
		if !errors.As(err, &se) || !errors.Is(err, client.ErrService) {
			t.Fatalf("want a *client.ServiceError, got %v", err)
		}
		return se.Code
	}
	if _, err := c.Memory(ctx, "cl"); code(err) != "404" {
		t.Fatalf("memory before any extraction: %v, want 404", err)
	}
	if _, err := c.Extract(ctx, "nobody", events.ExtractRequest{}); code(err) != "422" {
		t.Fatalf("extract of an empty session: %v, want 422", err)
	}
	res, err := c.Extract(ctx, "cl", events.ExtractRequest{TimeoutMS: 30000})
	if err != nil || !res.Success || res.Revision == 0 {
		t.Fatalf("extract: %+v, %v", res, err)
	}
	mem, err := c.Memory(ctx, "cl")
	if err != nil || mem.Revision != res.Revision || !strings.Contains(mem.Record.Notes, "v1.64") {
		t.Fatalf("memory: %+v, %v", mem, err)
	}
	// Two short messages: the summary would be longer than the context, so
	// the answer is no_reduction — a reply, not an error.
	rep, err := c.Compact(ctx, "cl", events.CompactRequest{})
	if err != nil || rep.Outcome != "no_reduction" || rep.MemoryRevision != res.Revision {
		t.Fatalf("compact: %+v, %v", rep, err)
	}
	if _, err := c.Edit(ctx, "cl", events.EditRequest{ContextManagement: &events.ContextManagement{Edits: []events.ContextEdit{{Type: "no_such_strategy"}}}}); code(err) != "400" {
		t.Fatalf("edit with an unknown strategy: %v, want 400", err)
	}
}
