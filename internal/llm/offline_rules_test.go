package llm_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// session builds a small transcript for the structural rules.
type session struct {
	msgs []events.Message
	n    int
}

func (s *session) user(text string) *session {
	s.msgs = append(s.msgs, events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text}}})
	return s
}

func (s *session) say(text string) *session {
	s.msgs = append(s.msgs, events.Message{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockText, Text: text}}})
	return s
}

// tool calls tool with input; the result is output, an error when failed.
func (s *session) tool(tool string, input map[string]string, output string, failed bool) *session {
	s.n++
	id := fmt.Sprintf("toolu_%02d", s.n)
	in, _ := json.Marshal(input)
	s.msgs = append(s.msgs,
		events.Message{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockToolUse, ID: id, Name: tool, Input: in}}},
		events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: id, IsError: failed,
			Content: events.Content{{Type: events.BlockText, Text: output}}}}})
	return s
}

func (s *session) bash(cmd, output string, failed bool) *session {
	return s.tool("Bash", map[string]string{"command": cmd}, output, failed)
}

func (s *session) edit(path, old, new string) *session {
	return s.tool("Edit", map[string]string{"file_path": path, "old_string": old, "new_string": new}, "The file "+path+" has been updated.", false)
}

func (s *session) write(path, content string) *session {
	return s.tool("Write", map[string]string{"file_path": path, "content": content}, "File created successfully at: "+path, false)
}

func notesOf(t *testing.T, s *session) string {
	t.Helper()
	notes, _ := extract(t, memory.DefaultTemplate, s.msgs)
	return notes
}

// A long request keeps its first sentence and the sentences that name a
// value, wherever they stand; a short one is kept whole.
func TestOfflineLongRequestKeepsValues(t *testing.T) {
	filler := strings.Repeat("Keep the diffs small and run the tests after each change to the parser code. ", 6)
	long := "Some background before you start. " + filler + "Oh, and prefix each commit with ORCA-412, the changelog bot keys on it. " + filler
	notes := notesOf(t, new(session).user(long).say("Got it."))
	work := section(notes, "Worklog")
	if !strings.Contains(work, "- Some background before you start. … Oh, and prefix each commit with ORCA-412, the changelog bot keys on it. → replied") {
		t.Errorf("worklog:\n%s", work)
	}
	short := "Serve previews on port 4123 and write the export to out/a.json."
	if work := section(notesOf(t, new(session).user(short)), "Worklog"); !strings.Contains(work, "- "+short+" → replied") {
		t.Errorf("worklog:\n%s", work)
	}
}

// Files say what a write or an edit put there: a write's declarations, an
// edit's new lines.
func TestOfflineFilesSayWhatWasWritten(t *testing.T) {
	s := new(session).user("Make the yearly report faster.").
		write("/src/rates/cache.go", "package rates\n\nimport \"example.com/x/lru\"\n\n// pair is a currency pair.\ntype pair struct{ from, to string }\n\nvar lookups = lru.New[pair, float64](4096)\n").
		edit("/src/rates/rates.go", "\treturn table[k], nil\n", "\tif v, ok := lookups.Get(k); ok {\n\t\treturn v, nil\n\t}\n\treturn table[k], nil\n")
	files := section(notesOf(t, s), "Files and Functions")
	for _, want := range []string{
		"- `/src/rates/cache.go` — Write | wrote: type pair struct{ from, to string }; var lookups = lru.New[pair, float64](4096)",
		"- `/src/rates/rates.go` — Edit | edit: if v, ok := lookups.Get(k); ok {; return v, nil",
	} {
		if !strings.Contains(files, want) {
			t.Errorf("files lack %q:\n%s", want, files)
		}
	}
}

// Every command with its exit status and the last lines of its output, a
// run of similar lines shown once.
func TestOfflineCommandResults(t *testing.T) {
	var out strings.Builder
	for i := range 50 {
		fmt.Fprintf(&out, "    import_test.go:%d: batch %d: 300 records committed\n", 40+i%9, i)
	}
	out.WriteString("    import_test.go:88: big.csv: 48760 rows imported, 0 rejected\n--- PASS: TestImportBig (2.43s)\nPASS\nok  \texample.com/x/internal/importer\t2.512s\n")
	s := new(session).user("Is the integration suite green?").
		bash("go test -tags integration ./internal/importer/", out.String(), false).
		bash("go vet ./...", "Exit code 1\nvet: internal/a.go:3: unreachable code", true)
	flow := section(notesOf(t, s), "Workflow")
	want := "- `go test -tags integration ./internal/importer/` → ok: import_test.go:44: batch 49: 300 records committed | import_test.go:88: big.csv: 48760 rows imported, 0 rejected | --- PASS: TestImportBig (2.43s) | ok example.com/x/internal/importer 2.512s\n" +
		"- `go vet ./...` → failed"
	if flow != want {
		t.Errorf("workflow:\n%s\nwant\n%s", flow, want)
	}
}

// A failure is followed by what resolved it: the agent's first words and
// the edit after it.
func TestOfflineFailureWithItsFix(t *testing.T) {
	s := new(session).user("Get it compiling again.").
		bash("make build", "Exit code 1\ninternal/report/a.go:12:3: undefined: parseMeadowRow", true).
		say("Let me look at that file.").
		tool("Read", map[string]string{"file_path": "/src/internal/report/a.go"}, "package report", false).
		edit("/src/internal/report/a.go", "rows, err := parseMeadowRow(line, 0)", "rows, err := decodeJuniperRow(line)").
		bash("make build", "", false).
		say("Builds cleanly now.")
	errs := section(notesOf(t, s), "Errors & Corrections")
	want := "- Bash `make build` failed: Exit code 1 internal/report/a.go:12:3: undefined: parseMeadowRow (→ decodeJuniperRow) → Let me look at that file. → Edit `/src/internal/report/a.go`: rows, err := decodeJuniperRow(line)\n" +
		"- Changed `parseMeadowRow` → `decodeJuniperRow`"
	if errs != want {
		t.Errorf("errors:\n%s\nwant\n%s", errs, want)
	}
}

// correction is a session whose later request changes the path and port
// an earlier one set, said as say says it; the agent edits both.
func correction(say string) *session {
	return new(session).
		user("Write the export to out/tally-velvet.json and serve previews on port 4123.").
		write("/src/export/settings.go", "package export\n\nconst (\n\tdefaultPath = \"out/tally-velvet.json\"\n\tpreviewPort = 4123\n)\n").
		say("Settings are in place.").
		user(say).
		edit("/src/export/settings.go", "defaultPath = \"out/tally-velvet.json\"", "defaultPath = \"exports/tally-harbor.csv\"").
		edit("/src/export/settings.go", "previewPort = 4123", "previewPort = 8123").
		say("Updated.")
}

// A later request that changes what an earlier one set supersedes it: the
// notes record the change and mark every mention of the old value, so the
// old value never stands after the new one; another extraction of the same
// conversation changes nothing.
func TestOfflineLaterRequestSupersedes(t *testing.T) {
	notes := notesOf(t, correction("Use 8123 for the preview server — 4123 clashes with the metrics sidecar; the export belongs in exports/tally-harbor.csv."))
	errs := section(notes, "Errors & Corrections")
	for _, want := range []string{"- Changed `out/tally-velvet.json` → `exports/tally-harbor.csv`", "- Changed `4123` → `8123`"} {
		if !strings.Contains(errs, want) {
			t.Errorf("errors lack %q:\n%s", want, errs)
		}
	}
	body := notes[strings.Index(notes, "# Task specification"):]
	for old, new := range map[string]string{"4123": "8123", "out/tally-velvet.json": "exports/tally-harbor.csv"} {
		if strings.LastIndex(body, old) > strings.LastIndex(body, new) {
			t.Errorf("%s stands after %s:\n%s", old, new, body)
		}
	}
	if !strings.Contains(section(notes, "Worklog"), "serve previews on port 4123 (→ 8123).") {
		t.Errorf("worklog:\n%s", section(notes, "Worklog"))
	}
	if again, n := extract(t, notes, correction("Use 8123 for the preview server — 4123 clashes with the metrics sidecar; the export belongs in exports/tally-harbor.csv.").msgs); n != 0 || again != notes {
		t.Errorf("the same conversation again made %d edits", n)
	}
}

// The same correction said another way (with a marker word, without one,
// the old value named last) gives the same notes but for the request's
// own words.
func TestOfflineRewordedFactSameOutcome(t *testing.T) {
	sayings := []string{
		"Actually, change of plan: write the export to exports/tally-harbor.csv, and the preview server must listen on port 8123.",
		"Ops collects from exports/tally-harbor.csv now; previews go on 8123.",
		"Use 8123 for the preview server — 4123 clashes with the metrics sidecar; the export belongs in exports/tally-harbor.csv.",
	}
	var first map[string]string
	for _, say := range sayings {
		notes := notesOf(t, correction(say))
		got := map[string]string{}
		for _, h := range []string{"Files and Functions", "Workflow", "Errors & Corrections", "Key results"} {
			got[h] = section(notes, h)
		}
		if first == nil {
			first = got
			continue
		}
		for h, body := range got {
			if body != first[h] {
				t.Errorf("%q: %s differs:\n%s\nwant\n%s", say, h, body, first[h])
			}
		}
	}
}

// Past the Worklog's bounds, requests that name nothing specific fold first:
// an early request with a value outlives later plain ones.
func TestOfflineWorklogFoldsPlainFirst(t *testing.T) {
	l := &loop{}
	notes := memory.DefaultTemplate
	l.request("Start every commit message with ORCA-412.")
	l.call(0)
	for i := range 60 {
		l.request(fmt.Sprintf("Tidy up the helpers in internal/report/part%d.go, nothing fancy.", i))
		l.call(i*10 + 1)
		l.call(i*10 + 2)
		notes, _ = extract(t, notes, l.window(max(0, len(l.calls)-6), len(l.calls)))
	}
	work := section(notes, "Worklog")
	if !strings.Contains(work, "ORCA-412") || !strings.Contains(work, "earlier requests → ") {
		t.Errorf("worklog:\n%s", work)
	}
	if r := memory.SizeReminders(notes); r != "" {
		t.Errorf("over budget: %s", r)
	}
}
