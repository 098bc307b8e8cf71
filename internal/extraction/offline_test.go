package extraction_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixture imports one of the importer's Claude Code transcripts as stored
// transcript messages.
func fixture(t *testing.T, name string) []events.Message {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "importer", "testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := importer.ClaudeCode(f, importer.Options{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.Message
	for _, e := range res.Events {
		if e.Type() != events.TypeMessage {
			continue
		}
		var m events.Message
		if err := e.DataAs(&m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		t.Fatalf("fixture %s has no messages", name)
	}
	return msgs
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run with -update to accept):\n%s", name, got)
	}
}

// TestOfflineGolden runs the offline provider over the fixture transcripts in
// two extractions (half the transcript, then all of it, continuing from the
// first notes) and compares both documents with golden files.
func TestOfflineGolden(t *testing.T) {
	for _, name := range []string{"coding-session", "refactor-session"} {
		t.Run(name, func(t *testing.T) {
			records := fixture(t, name)
			notes := memory.DefaultTemplate
			half := len(records) / 2
			for step, upTo := range []int{half, len(records)} {
				conv := extraction.BuildConversation(records[:upTo], -1, 0)
				out, err := extraction.Run(context.Background(), llm.NewOffline(), extraction.Input{
					Tenant: tenant, Session: session, Notes: notes, Template: memory.DefaultTemplate, Conversation: conv,
				})
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if out.EditsRejected != 0 || out.EditsApplied == 0 {
					t.Errorf("step %d: %d edits applied, %d rejected", step, out.EditsApplied, out.EditsRejected)
				}
				if err := memory.CheckStructure(memory.DefaultTemplate, out.Notes); err != nil {
					t.Errorf("step %d: %v", step, err)
				}
				if tok := memory.DocumentTokens(out.Notes); tok > memory.MaxTotalTokens/2 {
					t.Errorf("step %d: notes are %d tokens", step, tok)
				}
				if r := memory.SizeReminders(out.Notes); r != "" {
					t.Errorf("step %d: offline notes over budget: %s", step, r)
				}
				golden(t, name+"."+[]string{"half", "full"}[step]+".md", out.Notes)
				notes = out.Notes
			}
			// Deterministic and idempotent: the same input gives the same
			// notes, and nothing new gives no edit.
			conv := extraction.BuildConversation(records, -1, 0)
			again, err := extraction.Run(context.Background(), llm.NewOffline(), extraction.Input{
				Tenant: tenant, Session: session, Notes: notes, Conversation: conv,
			})
			if err != nil {
				t.Fatal(err)
			}
			if again.Notes != notes || again.EditsApplied != 0 {
				t.Errorf("re-running on the same transcript applied %d edits", again.EditsApplied)
			}
		})
	}
}

// TestOfflineSections checks what the offline provider derives from a small
// transcript, section by section.
func TestOfflineSections(t *testing.T) {
	conv := []events.Message{
		text(events.RoleUser, "Add a --json flag to the report command. It should print the totals as JSON."),
		{Role: events.RoleAssistant, Content: events.Content{
			{Type: events.BlockToolUse, ID: "r1", Name: "Read", Input: []byte(`{"file_path":"/src/report.go"}`)},
		}},
		{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: "r1", Content: events.Content{{Type: events.BlockText, Text: "package report"}}}}},
		{Role: events.RoleAssistant, Content: events.Content{
			{Type: events.BlockToolUse, ID: "b1", Name: "Bash", Input: []byte(`{"command":"go build ./..."}`)},
			{Type: events.BlockToolUse, ID: "e1", Name: "Edit", Input: []byte(`{"file_path":"/src/report.go","old_string":"a","new_string":"b"}`)},
		}},
		{Role: events.RoleUser, Content: events.Content{
			{Type: events.BlockToolResult, ToolUseID: "b1", IsError: true, Content: events.Content{{Type: events.BlockText, Text: "report.go:3: undefined: json"}}},
			{Type: events.BlockToolResult, ToolUseID: "e1", Content: events.Content{{Type: events.BlockText, Text: "ok"}}},
		}},
		text(events.RoleAssistant, "Added the flag."),
		text(events.RoleUser, "No, use encoding/json instead of fmt for the output."),
		text(events.RoleAssistant, "Switched to encoding/json."),
	}
	out, err := extraction.Run(context.Background(), llm.NewOffline(), extraction.Input{Tenant: tenant, Session: session, Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	_, secs := memory.Parse(out.Notes)
	body := map[string]string{}
	for _, s := range secs {
		body[s.Header] = strings.TrimSpace(s.Body)
	}
	want := map[string]string{
		"Session Title":                     "Add a --json flag to the report command",
		"Current State":                     "Latest request: No, use encoding/json instead of fmt for the output.\nLatest reply: Switched to encoding/json.",
		"Task specification":                "Add a --json flag to the report command. It should print the totals as JSON.\n- Standing: No, use encoding/json instead of fmt for the output.",
		"Files and Functions":               "- `/src/report.go` — Read, Edit | added: b",
		"Workflow":                          "- `go build ./...` → failed",
		"Errors & Corrections":              "- Bash `go build ./...` failed: report.go:3: undefined: json → Added the flag.",
		"Codebase and System Documentation": "",
		"Learnings":                         "",
		"Key results":                       "",
		"Worklog": "- Add a --json flag to the report command. It should print the totals as JSON. → Read, Bash, Edit\n" +
			"- No, use encoding/json instead of fmt for the output. → replied\n" +
			"<!-- recall-offline: counted through tool call e1 -->",
	}
	for h, w := range want {
		if body[h] != w {
			t.Errorf("%s:\n%q\nwant\n%q", h, body[h], w)
		}
	}
	if out.Provider != "offline" || out.Model != llm.OfflineModel || out.Turns != 1 || out.EditsApplied != 7 {
		t.Errorf("provider %s model %s turns %d applied %d", out.Provider, out.Model, out.Turns, out.EditsApplied)
	}
}

// TestOfflineIgnoresOmittedNote: after the cost cap cut the conversation, the
// note about omitted messages is not taken for a user request.
func TestOfflineIgnoresOmittedNote(t *testing.T) {
	big := strings.Repeat("y", 8000)
	records := []events.Message{
		text(events.RoleUser, "old request "+big),
		text(events.RoleAssistant, "old reply "+big),
		text(events.RoleUser, "Rename the package to ledger"),
		text(events.RoleAssistant, "Renamed."),
	}
	conv := extraction.BuildConversation(records, 1, 1000)
	if conv[0].Content[0].Text != extraction.OmittedNote {
		t.Fatalf("conversation not cut:\n%s", extraction.String(conv))
	}
	out, err := extraction.Run(context.Background(), llm.NewOffline(), extraction.Input{Tenant: tenant, Session: session, Conversation: conv})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Notes, "Earlier messages") || !strings.Contains(out.Notes, "# Session Title\n_A short and distinctive 5-10 word descriptive title for the session. Super info dense, no filler_\nRename the package to ledger\n") {
		t.Errorf("notes:\n%s", out.Notes)
	}
}
