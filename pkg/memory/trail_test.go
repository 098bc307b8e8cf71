package memory

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// trailSession builds a transcript of tool calls and their results.
type trailSession struct {
	msgs []*events.Message
	n    int
}

func (s *trailSession) call(name string, input map[string]any, result string, isError bool) {
	s.n++
	id := fmt.Sprintf("toolu_%d", s.n)
	in, _ := json.Marshal(input)
	s.msgs = append(s.msgs,
		&events.Message{UUID: fmt.Sprintf("a%d", s.n), Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockToolUse, ID: id, Name: name, Input: in}}},
		&events.Message{UUID: fmt.Sprintf("r%d", s.n), Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: id, IsError: isError, Content: events.Content{{Type: events.BlockText, Text: result}}}}})
}

func (s *trailSession) bash(cmd, out string, isError bool) {
	s.call("Bash", map[string]any{"command": cmd}, out, isError)
}

func (s *trailSession) prompt(text string) {
	s.n++
	s.msgs = append(s.msgs, &events.Message{UUID: fmt.Sprintf("u%d", s.n), Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: text}}})
}

func fileByPath(fs []events.TrailFile, p string) *events.TrailFile {
	for i := range fs {
		if fs[i].Path == p {
			return &fs[i]
		}
	}
	return nil
}

func TestTrailMovesDeletesEditsThroughTheShell(t *testing.T) {
	s := &trailSession{}
	cwd := "/home/dev/app/"
	s.call("Write", map[string]any{"file_path": cwd + "src/cache.py", "content": "a\nb\n"}, "File created successfully at: "+cwd+"src/cache.py", false)
	s.call("Edit", map[string]any{"file_path": cwd + "src/cache.py", "old_string": "a", "new_string": "A"}, "The file has been updated.", false)
	s.call("Edit", map[string]any{"file_path": cwd + "src/cache.py", "old_string": "zz", "new_string": "y"}, "<tool_use_error>String to replace not found in file.</tool_use_error>", true)
	s.bash("sed -i 's/b/B/' src/cache.py", "", false)
	s.bash("git mv src/cache.py src/lru.py", "", false)
	s.call("Write", map[string]any{"file_path": cwd + "README.md", "content": "x"}, "The file "+cwd+"README.md has been updated successfully.", false)
	s.bash("rm old/legacy.py && touch src/__init__.py", "", false)
	s.bash("python -m pytest -q", "Exit code 1\nE   ModuleNotFoundError: No module named 'cache'", true)
	s.call("MultiEdit", map[string]any{"file_path": cwd + "tests/test_lru.py", "edits": []any{map[string]any{"old_string": "import cache", "new_string": "import lru"}}}, "Applied 1 edit", false)
	s.bash("python -m pytest -q", "3 passed", false)
	s.call("NotebookEdit", map[string]any{"notebook_path": cwd + "nb/explore.ipynb", "edit_mode": "insert", "new_source": "x"}, "ok", false)

	tr := FoldTrail(nil, s.msgs, nil)
	for _, tc := range []struct {
		path             string
		created, deleted bool
		from             string
		changes          int
		describe         string
	}{
		{"src/lru.py", true, false, "src/cache.py", 4, "created, moved from `src/cache.py`, edited 2 times"},
		{cwd + "README.md", false, false, "", 1, "edited 1 time"},
		{"old/legacy.py", false, true, "", 1, "deleted"},
		{"src/__init__.py", true, false, "", 1, "created"},
		{cwd + "tests/test_lru.py", false, false, "", 1, "edited 1 time"},
		{cwd + "nb/explore.ipynb", false, false, "", 1, "edited 1 time"},
	} {
		f := fileByPath(tr.Files, tc.path)
		if f == nil {
			t.Fatalf("no %s in %+v", tc.path, tr.Files)
		}
		if f.Created != tc.created || f.Deleted != tc.deleted || f.From != tc.from || f.Changes != tc.changes || describe(*f) != tc.describe {
			t.Errorf("%s: %+v (%s), want created=%v deleted=%v from=%q changes=%d %q", tc.path, *f, describe(*f), tc.created, tc.deleted, tc.from, tc.changes, tc.describe)
		}
	}
	if len(tr.Files) != 6 {
		t.Errorf("%d files, want 6: %+v", len(tr.Files), tr.Files)
	}
	if tr.TotalCommands != 5 || tr.TotalErrors != 2 {
		t.Errorf("commands %d, errors %d; want 5 and 2", tr.TotalCommands, tr.TotalErrors)
	}
	pytest := tr.Errors[1]
	if !pytest.Passed || !strings.Contains(pytest.Error, "ModuleNotFoundError") || !strings.Contains(pytest.Fix, "test_lru.py") {
		t.Errorf("the pytest error: %+v", pytest)
	}
	out := RenderTrail(tr)
	for _, want := range []string{"`src/lru.py` — created, moved from", "`old/legacy.py` — deleted; last: deleted (rm old/legacy.py)", "exit 1: E   ModuleNotFoundError", "it passed afterwards", "→ ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered trail lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "nb/explore.ipynb") < strings.Index(out, "src/lru.py") {
		t.Errorf("files are not in the order of their last change:\n%s", out)
	}
}

// TestTrailLongSessionInParts folds a long session — 600 files changed,
// thousands of calls, compactions between them — in overlapping parts as
// extractions read it, and checks the result is the fold of the whole,
// every changed file is kept or counted, the counts are right and the
// rendering stays bounded.
func TestTrailLongSessionInParts(t *testing.T) {
	s := &trailSession{}
	edits := map[string]int{}
	for i := 0; i < 3000; i++ {
		p := fmt.Sprintf("pkg/m%03d/file.go", (i*7)%600)
		switch {
		case i%500 == 499:
			s.prompt("This session is being continued from a previous conversation that ran out of context.")
		case i%3 == 0:
			s.call("Edit", map[string]any{"file_path": p, "old_string": "x", "new_string": fmt.Sprint(i)}, "updated", false)
			edits[p]++
		case i%3 == 1:
			s.bash(fmt.Sprintf("sed -i 's/a/b/' %s", p), "", false)
			edits[p]++
		default:
			s.bash("go test ./...", "ok", false)
		}
	}
	whole := FoldTrail(nil, s.msgs, nil)
	seqs := make([]uint64, len(s.msgs))
	for i := range seqs {
		seqs[i] = uint64(i + 1)
	}
	var parts *events.Trail
	for from := 0; from < len(s.msgs); from += 700 {
		start := max(0, from-150) // each read starts a little before the last coverage
		end := min(len(s.msgs), from+700)
		parts = FoldTrail(parts, s.msgs[start:end], seqs[start:end])
	}
	if !reflect.DeepEqual(whole, parts) {
		t.Fatalf("folding in parts differs from folding the whole: %d/%d files, %d/%d commands", len(parts.Files), len(whole.Files), parts.TotalCommands, whole.TotalCommands)
	}
	if len(whole.Files)+whole.DroppedFiles != len(edits) || len(whole.Files) > TrailMaxFiles {
		t.Fatalf("%d files kept and %d dropped, want %d in all, at most %d kept", len(whole.Files), whole.DroppedFiles, len(edits), TrailMaxFiles)
	}
	for _, f := range whole.Files {
		if f.Changes != edits[f.Path] {
			t.Errorf("%s: %d changes, want %d", f.Path, f.Changes, edits[f.Path])
		}
	}
	out := RenderTrail(whole)
	if n := strings.Count(out, "\n- `pkg/"); n != TrailShowFiles {
		t.Errorf("%d files listed, want %d", n, TrailShowFiles)
	}
	if !strings.Contains(out, fmt.Sprintf("… %d files changed earlier are not listed", len(edits)-TrailShowFiles)) {
		t.Errorf("the rest is not counted:\n%s", out)
	}
	if tok := EstimateText(out); tok > 4000 {
		t.Errorf("the rendering is %d tokens", tok)
	}
}

func TestWithTrailReplacesACopy(t *testing.T) {
	s := &trailSession{}
	s.call("Write", map[string]any{"file_path": "a.go", "content": "x"}, "File created successfully", false)
	tr := FoldTrail(nil, s.msgs, nil)
	notes := "# Current State\nworking\n\n" + TrailFilesHeading + "\n- `old.go` — stale copy\n\n# Worklog\n- did things\n"
	got := WithTrail(notes, tr)
	if strings.Contains(got, "stale copy") || strings.Count(got, TrailFilesHeading) != 1 || !strings.Contains(got, "# Worklog\n- did things") || !strings.Contains(got, "`a.go` — created") {
		t.Fatalf("WithTrail:\n%s", got)
	}
	if WithTrail(notes, nil) != notes {
		t.Fatal("an empty trail changed the notes")
	}
}
