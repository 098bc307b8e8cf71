package wire

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

func msgs(t *testing.T, js string) []Msg {
	t.Helper()
	var out []Msg
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecordIDsSurviveRestructuring: the restructurings Claude Code applies
// between requests keep every id; a repeated message is two records.
func TestRecordIDsSurviveRestructuring(t *testing.T) {
	before := msgs(t, `[
	 {"role":"user","content":[{"type":"text","text":"read the file"}]},
	 {"role":"system","content":[{"type":"text","text":"date"}]},
	 {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"`+strings.Repeat("x", 30000)+`"},{"type":"tool_result","tool_use_id":"toolu_1","content":"b"}]},
	 {"role":"assistant","content":"ok"},
	 {"role":"user","content":"continue"},
	 {"role":"assistant","content":"ok"},
	 {"role":"user","content":[{"type":"text","text":"continue","cache_control":{"type":"ephemeral"}}]}]`)
	after := msgs(t, `[
	 {"role":"user","content":"read the file"},
	 {"role":"system","content":"date"},
	 {"role":"assistant","content":[{"type":"text","text":"reading"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"<persisted-output>Preview (first 2KB): xxx"},{"type":"tool_result","tool_use_id":"toolu_1","content":"[cleared]"}]},
	 {"role":"assistant","content":[{"type":"text","text":"ok"}]},
	 {"role":"user","content":[{"type":"text","text":"continue"}]},
	 {"role":"assistant","content":"ok"},
	 {"role":"user","content":"continue"}]`)
	a, b := RecordIDs("s1", before), RecordIDs("s1", after)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("ids changed:\n%v\n%v", a, b)
	}
	if a[1] != "" {
		t.Fatalf("a system turn got id %q", a[1])
	}
	seen := map[string]int{}
	for i, id := range a {
		if id == "" {
			continue
		}
		if j, dup := seen[id]; dup {
			t.Fatalf("messages %d and %d share id %s", j, i, id)
		}
		seen[id] = i
		if err := events.ValidateID(id); err != nil || len(id) != 34 {
			t.Fatalf("id %q: %v", id, err)
		}
	}
	if other := RecordIDs("s2", before); other[0] == a[0] {
		t.Fatal("two sessions share a record id")
	}
	// The history after a compaction: the tool exchange kept verbatim keeps
	// its ids although what came before it is gone.
	kept := RecordIDs("s1", append(msgs(t, `[{"role":"user","content":"This session is being continued…"}]`), before[2:4]...))
	if kept[1] != a[2] || kept[2] != a[3] {
		t.Fatalf("kept tool exchange ids %v, want %v", kept[1:], a[2:4])
	}
}

// TestRecordIDsOfRecordedClaudeCode: over Claude Code's recorded requests,
// every tool exchange keeps one id from request to request (compactions
// included), and within a request no two messages share one.
func TestRecordIDsOfRecordedClaudeCode(t *testing.T) {
	files, _ := filepath.Glob("../gatewaysvc/testdata/claudecode/*-main.json")
	files2, _ := filepath.Glob("../gatewaysvc/testdata/claudecode/*-compaction.json")
	files = append(files, files2...)
	sort.Strings(files)
	if len(files) < 40 {
		t.Fatalf("%d fixtures", len(files))
	}
	byTool := map[string]string{} // tool id → record id
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var fx struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatal(err)
		}
		r, err := DecodeMessages(fx.Body)
		if err != nil {
			t.Fatal(f, err)
		}
		ids := RecordIDs("cc", r.Messages)
		seen := map[string]bool{}
		for i, id := range ids {
			if id != "" && seen[id] {
				t.Fatalf("%s: message %d repeats id %s", f, i, id)
			}
			seen[id] = true
			for _, bl := range r.Messages[i].Content {
				tid := bl.ID + bl.ToolUseID
				if tid == "" {
					continue
				}
				k := r.Messages[i].Role + tid
				if old, ok := byTool[k]; ok && old != id {
					t.Fatalf("%s: the message holding %s changed id %s → %s", f, k, old, id)
				}
				byTool[k] = id
			}
		}
	}
	if len(byTool) < 80 {
		t.Fatalf("only %d tool blocks seen", len(byTool))
	}
}

func TestChatAndResponsesRecordIDs(t *testing.T) {
	var chat []ChatMessage
	_ = json.Unmarshal([]byte(`[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},
	 {"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},
	 {"role":"tool","tool_call_id":"call_1","content":"42"},{"role":"assistant","content":"done"}]`), &chat)
	ids := ChatRecordIDs("s", chat)
	if ids[0] != "" || ids[1] == "" || ids[2] == ids[3] || ids[4] == "" {
		t.Fatalf("chat ids %v", ids)
	}
	// A Chat client re-sending a shorter history (it dropped the system
	// turn) keeps the ids of the strong messages.
	if again := ChatRecordIDs("s", chat[1:]); again[1] != ids[2] || again[2] != ids[3] {
		t.Fatalf("chat ids %v vs %v", again, ids)
	}
	r, err := DecodeResponses([]byte(`{"model":"m","previous_response_id":"resp_1","input":[
	 {"type":"function_call_output","call_id":"call_1","output":"42"},{"role":"user","content":"and now?"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a := ResponsesRecordIDs("s", r.PreviousResponseID, r.Items)
	b := ResponsesRecordIDs("s", "resp_2", r.Items)
	if a[0] != b[0] || a[1] != b[1] {
		t.Fatalf("a result keeps its id whatever response precedes it: %v %v", a, b)
	}
	// Only the new input after two different responses: "continue" is two
	// records.
	c1 := ResponsesRecordIDs("s", "resp_1", r.Items[1:])
	c2 := ResponsesRecordIDs("s", "resp_2", r.Items[1:])
	if c1[0] == c2[0] || c1[0] == a[1] {
		t.Fatalf("a text after another response must be another record: %v %v %v", c1, c2, a)
	}
	if a[0] != ids[3] {
		t.Fatal("a function_call_output and a chat tool message answering one call id differ")
	}
}
