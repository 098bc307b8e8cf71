package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

const notesPath = "/notes.md"

// loop is a session of user requests, each followed by tool calls: a Bash
// command, and every tenth call an Edit, every 37th a failing one.
type loop struct {
	msgs  []events.Message
	calls []int // index in msgs of the assistant message of each call
}

func (l *loop) request(text string) {
	l.msgs = append(l.msgs, events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text}}})
}

func (l *loop) call(i int) {
	id := fmt.Sprintf("toolu_%03d", i)
	name, in := "Bash", fmt.Sprintf(`{"command":"go test ./services/handler%03d/..."}`, i)
	if i%10 == 9 {
		name, in = "Edit", fmt.Sprintf(`{"file_path":"/src/handler%03d.go","old_string":"a","new_string":"b"}`, i)
	}
	l.calls = append(l.calls, len(l.msgs))
	l.msgs = append(l.msgs,
		events.Message{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(in)}}},
		events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: id, IsError: i%37 == 36,
			Content: events.Content{{Type: events.BlockText, Text: fmt.Sprintf("output %d", i)}}}}})
}

// window is the conversation an extraction covering calls [0, upTo) shows
// when the token cap keeps only the calls from `from` on: cut windows open
// with the extraction's note about omitted messages, as BuildWindow's do.
func (l *loop) window(from, upTo int) []events.Message {
	end := len(l.msgs)
	if upTo < len(l.calls) {
		end = l.calls[upTo]
	}
	if from == 0 {
		return append([]events.Message(nil), l.msgs[:end]...)
	}
	omitted := events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "[Earlier messages of this session are omitted here; the current notes cover them.]"}}}
	return append([]events.Message{omitted}, l.msgs[l.calls[from]:end]...)
}

// extract runs the offline provider on conv the way extraction.Run does and
// applies its edits; it returns the new notes and how many edits it made.
func extract(t *testing.T, notes string, conv []events.Message) (string, int) {
	t.Helper()
	msgs := append(append([]events.Message(nil), conv...), events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "update the notes"}}})
	resp, err := llm.NewOffline().Complete(context.Background(), llm.Request{Messages: msgs, Notes: notes, NotesPath: notesPath})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range resp.ToolCalls {
		var res string
		if notes, res, err = memory.ApplyToolCall(notes, notesPath, c.Name, c.Input); err != nil {
			t.Fatalf("edit rejected: %s", res)
		}
	}
	return notes, len(resp.ToolCalls)
}

func section(notes, header string) string {
	_, secs := memory.Parse(notes)
	for _, s := range secs {
		if s.Header == header {
			return strings.TrimSpace(s.Body)
		}
	}
	return ""
}

var countRe = regexp.MustCompile(`(\w+)×(\d+)`)

// worklogCalls sums the Worklog's counts per tool, fold line included.
func worklogCalls(body string) map[string]int {
	out := map[string]int{}
	for _, m := range countRe.FindAllStringSubmatch(body, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] += n
	}
	return out
}

// TestOfflineNotesAccumulate: 400 tool calls after two requests, extracted
// in windows of 40 new calls that overlap the previous window by 30 (the
// request cut off from all but the first): the worklog counts every call
// once, the first commands stay in the workflow, every section stays
// within its budget, and running the last window again changes nothing.
func TestOfflineNotesAccumulate(t *testing.T) {
	for _, overlap := range []int{0, 30} {
		t.Run(fmt.Sprintf("overlap%d", overlap), func(t *testing.T) {
			l := &loop{}
			l.request("Migrate every handler to the v2 router and run its tests.")
			for i := range 400 {
				if i == 250 {
					l.request("Now also migrate the remaining handlers under legacy/.")
				}
				l.call(i)
			}
			notes := memory.DefaultTemplate
			for upTo := 40; upTo <= 400; upTo += 40 {
				notes, _ = extract(t, notes, l.window(max(0, upTo-40-overlap), upTo))
			}
			work := section(notes, "Worklog")
			if got := worklogCalls(work); got["Bash"] != 360 || got["Edit"] != 40 {
				t.Fatalf("worklog counts %v, want Bash×360 Edit×40:\n%s", got, work)
			}
			for _, want := range []string{"- Migrate every handler to the v2 router and run its tests. → Bash×225, Edit×25",
				"- Now also migrate the remaining handlers under legacy/. → Bash×135, Edit×15"} {
				if !strings.Contains(work, want) {
					t.Errorf("worklog lacks %q:\n%s", want, work)
				}
			}
			flow := section(notes, "Workflow")
			for _, want := range []string{"go test ./services/handler000/...", "go test ./services/handler398/...", "earlier commands not listed"} {
				if !strings.Contains(flow, want) {
					t.Errorf("workflow lacks %q:\n%s", want, flow)
				}
			}
			if files := section(notes, "Files and Functions"); !strings.Contains(files, "earlier files not listed") || !strings.Contains(files, "/src/handler399.go") {
				t.Errorf("files:\n%s", files)
			}
			if r := memory.SizeReminders(notes); r != "" {
				t.Errorf("over budget: %s", r)
			}
			if err := memory.CheckStructure(memory.DefaultTemplate, notes); err != nil {
				t.Error(err)
			}
			if again, n := extract(t, notes, l.window(360-overlap, 400)); n != 0 || again != notes {
				t.Errorf("the same window again made %d edits", n)
			}
		})
	}
}

// TestOfflineWorklogFolds: past the line limit, the oldest requests fold
// into one line that keeps their counts.
func TestOfflineWorklogFolds(t *testing.T) {
	l := &loop{}
	notes := memory.DefaultTemplate
	for i := range 100 {
		l.request(fmt.Sprintf("Step %d: migrate the next handler.", i))
		l.call(i * 10) // a Bash call
		l.call(i*10 + 1)
		notes, _ = extract(t, notes, l.window(max(0, len(l.calls)-6), len(l.calls)))
	}
	work := section(notes, "Worklog")
	if got := worklogCalls(work); got["Bash"] != 200 {
		t.Fatalf("worklog counts %v, want Bash×200:\n%s", got, work)
	}
	if !strings.Contains(work, "earlier requests → Bash×") || !strings.Contains(work, "Step 99: migrate the next handler. → Bash×2") {
		t.Errorf("worklog:\n%s", work)
	}
	if r := memory.SizeReminders(notes); r != "" {
		t.Errorf("over budget: %s", r)
	}
}
