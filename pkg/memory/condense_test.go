package memory

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

func userMsg(text string) *events.Message {
	return &events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text}}}
}

func callMsg(id, name string, input map[string]string) *events.Message {
	raw, _ := json.Marshal(input)
	return &events.Message{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockToolUse, ID: id, Name: name, Input: raw}}}
}

func resultMsg(id, out string, isErr bool) *events.Message {
	return &events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: id, IsError: isErr,
		Content: events.Content{{Type: events.BlockText, Text: out}}}}}
}

// filledNotes is the default template with a few sections filled.
func filledNotes() string {
	n := strings.Replace(DefaultTemplate, "_A short and distinctive 5-10 word descriptive title for the session. Super info dense, no filler_\n",
		"_A short and distinctive 5-10 word descriptive title for the session. Super info dense, no filler_\nMigrate handlers to the v2 router\n", 1)
	return strings.Replace(n, "_Step by step, what was attempted, done? Very terse summary for each step_\n",
		"_Step by step, what was attempted, done? Very terse summary for each step_\n- migrate handlers → Bash×12\n", 1)
}

func TestCondenseRecords(t *testing.T) {
	session := []*events.Message{
		userMsg("Now rename the package `router` to `mux`.\nKeep the old name as an alias."),
		callMsg("t1", "Bash", map[string]string{"command": "go build ./..."}),
		resultMsg("t1", "", false),
		callMsg("t2", "Edit", map[string]string{"file_path": "mux/mux.go", "old_string": "a", "new_string": "b"}),
		resultMsg("t2", "String to replace not found in file.\nmore detail", true),
		{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "<system-reminder>plumbing</system-reminder>"}}},
		callMsg("t3", "Write", map[string]string{"file_path": "mux/alias.go", "content": "package mux"}),
		resultMsg("t3", "written", false),
		{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockText, Text: "Renamed."}}},
		userMsg("Also update the README."),
	}
	var many []*events.Message
	for i := range 300 {
		id := fmt.Sprintf("m%d", i)
		many = append(many, callMsg(id, "Bash", map[string]string{"command": fmt.Sprintf("go test ./pkg%03d/...", i)}), resultMsg(id, "ok", false))
	}
	many = append(many, userMsg(strings.Repeat("a very long pasted log line\n", 2000)), userMsg("Short request after the paste."))

	for _, tc := range []struct {
		name   string
		notes  string
		msgs   []*events.Message
		budget int64
		ok     bool
		want   []string
		not    []string
	}{
		{name: "notes and records", notes: filledNotes(), msgs: session, budget: 20000, ok: true, want: []string{
			"Migrate handlers to the v2 router", "- migrate handlers → Bash×12", condensedAfterNotes,
			"> Now rename the package `router` to `mux`.\n> Keep the old name as an alias.", "> Also update the README.",
			"- Bash `go build ./...` → ok", "- Edit `mux/mux.go` → error: String to replace not found in file.",
			"- Write `mux/alias.go` → ok", "- `mux/mux.go` (Edit)", "- `mux/alias.go` (Write)"},
			not: []string{"plumbing", "more detail", "The notes are up to date"}},
		{name: "records only", msgs: session, budget: 20000, ok: true, want: []string{condensedNoNotes, "> Also update the README.", "Tool calls and their outcomes (3, oldest first)"}},
		{name: "notes only", notes: filledNotes(), budget: 20000, ok: true, want: []string{"- migrate handlers → Bash×12"}, not: []string{condensedAfterNotes}},
		{name: "nothing", budget: 20000},
		{name: "template only counts as notes", notes: DefaultTemplate, msgs: nil, budget: 20000, ok: true, want: []string{"# Worklog"}},
		{name: "notes do not fit", notes: filledNotes(), msgs: session, budget: 100},
		{name: "tight budget keeps newest", notes: filledNotes(), msgs: many, budget: 2500, ok: true, want: []string{
			"- migrate handlers → Bash×12", "> Short request after the paste.", "(1 other messages from the user are too long",
			"earlier tool calls (Bash×", "- Bash `go test ./pkg299/...` → ok"},
			not: []string{"pkg000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := CondenseRecords(tc.notes, tc.msgs, tc.budget)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v\n%s", ok, tc.ok, got)
			}
			if !ok {
				if got != "" {
					t.Fatalf("not ok but text %q", got)
				}
				return
			}
			if n := EstimateText(got); n > tc.budget {
				t.Fatalf("%d tokens, over the budget of %d", n, tc.budget)
			}
			if tc.notes != "" && !strings.Contains(got, strings.TrimSpace(tc.notes)) {
				t.Fatalf("the notes are not in the summary whole:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("missing %q in\n%s", w, got)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("unexpected %q in\n%s", w, got)
				}
			}
		})
	}
}

// TestCondenseRecordsTruncatesNotes: a section over the compaction's
// section limit is cut at a line, never dropped.
func TestCondenseRecordsTruncatesNotes(t *testing.T) {
	long := strings.Repeat("- a worklog line that goes on for a while\n", 400)
	notes := strings.Replace(DefaultTemplate, "_Step by step, what was attempted, done? Very terse summary for each step_\n",
		"_Step by step, what was attempted, done? Very terse summary for each step_\n"+long, 1)
	got, ok := CondenseRecords(notes, []*events.Message{userMsg("go on")}, 20000)
	if !ok {
		t.Fatal("not ok")
	}
	want, _ := TruncateForCompact(notes, DefaultSectionMaxChars)
	if !strings.Contains(got, strings.TrimSpace(want)) || !strings.Contains(got, TruncationMarker) || !strings.Contains(got, "> go on") {
		t.Fatalf("the truncated notes and the request are not in\n%.500s", got)
	}
}

func ExampleCondenseRecords() {
	notes := "# Current State\n_What is actively being worked on right now?_\nAdding retries to the webhook client.\n"
	msgs := []*events.Message{
		userMsg("Cap the retries at three attempts."),
		callMsg("t1", "Edit", map[string]string{"file_path": "webhook/client.go", "old_string": "5", "new_string": "3"}),
		resultMsg("t1", "ok", false),
		callMsg("t2", "Bash", map[string]string{"command": "go test ./webhook/..."}),
		resultMsg("t2", "--- FAIL: TestRetryCap\nwant 3 attempts, got 4", true),
	}
	summary, ok := CondenseRecords(notes, msgs, 2000)
	fmt.Println(ok)
	fmt.Println(summary)
	// Output:
	// true
	// # Current State
	// _What is actively being worked on right now?_
	// Adding retries to the webhook client.
	//
	// Since these notes were last updated the conversation went on; Recall condensed it from the transcript below (no model was used).
	//
	// The user's messages, verbatim, oldest first:
	//
	// > Cap the retries at three attempts.
	//
	// Tool calls and their outcomes (2, oldest first):
	// - Edit `webhook/client.go` → ok
	// - Bash `go test ./webhook/...` → error: --- FAIL: TestRetryCap
	//
	// Files changed:
	// - `webhook/client.go` (Edit)
}
