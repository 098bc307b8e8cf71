package memory

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
)

func TestClipContentKeepsBlocksWithinTheLimit(t *testing.T) {
	c := events.Content{
		{Type: events.BlockText, Text: strings.Repeat("a", 4000)},
		{Type: events.BlockToolUse, ID: "t1", Name: "Write", Input: json.RawMessage(`{"content":"` + strings.Repeat("b", 3900) + `"}`)},
		{Type: events.BlockImage, Source: json.RawMessage(`{"data":"` + strings.Repeat("c", 100000) + `"}`)},
	}
	out, clipped := ClipContent(c, 1000)
	if clipped || &out[0] != &c[0] {
		t.Fatalf("content within the limit was copied or clipped (clipped=%v)", clipped)
	}
	if out, clipped := ClipContent(events.Content{{Type: events.BlockText, Text: strings.Repeat("a", 1_000_000)}}, 0); clipped || len(out[0].Text) != 1_000_000 {
		t.Fatal("a limit of 0 clipped")
	}
}

func TestClipContentText(t *testing.T) {
	text := "BEGIN " + strings.Repeat("é lorem ipsum ", 50000) + " END"
	c := events.Content{{Type: events.BlockText, Text: "short"}, {Type: events.BlockText, Text: text}}
	out, clipped := ClipContent(c, 1000)
	if !clipped || c[1].Text != text {
		t.Fatalf("clipped=%v; the input must stay as it was", clipped)
	}
	got := out[1].Text
	if !strings.HasPrefix(got, "BEGIN ") || !strings.HasSuffix(got, " END") || !strings.Contains(got, "bytes omitted by Recall") {
		t.Fatalf("clipped text keeps neither end or has no marker: %q … %q", got[:40], got[len(got)-40:])
	}
	if !utf8.ValidString(got) {
		t.Fatal("a cut split a character")
	}
	if n := EstimateText(got); n > 1000+EstimateText(ClipMarker) {
		t.Fatalf("clipped text is %d tokens, limit 1000", n)
	}
	if out[0].Text != "short" {
		t.Fatal("a short block changed")
	}
}

func TestClipContentToolBlocks(t *testing.T) {
	big := strings.Repeat("x<y&z ", 20000)
	input, _ := json.Marshal(map[string]any{"path": "/src/main.go", "content": big, "lines": []any{1, 2}})
	c := events.Content{
		{Type: events.BlockToolUse, ID: "t1", Name: "Write", Input: input},
		{Type: events.BlockToolResult, ToolUseID: "t1", IsError: true, Content: events.Content{{Type: events.BlockText, Text: big}}},
		{Type: events.BlockToolUse, ID: "t2", Name: "Bash", Input: json.RawMessage(`{"command": "` + big)}, // not JSON
	}
	out, clipped := ClipContent(c, 500)
	if !clipped {
		t.Fatal("nothing clipped")
	}
	var in map[string]any
	if err := json.Unmarshal(out[0].Input, &in); err != nil {
		t.Fatalf("clipped input is not JSON: %v", err)
	}
	if in["path"] != "/src/main.go" || len(in["lines"].([]any)) != 2 || !strings.Contains(in["content"].(string), "omitted by Recall") {
		t.Fatalf("clipped input %v", in)
	}
	if strings.Contains(string(out[0].Input), `\u003c`) {
		t.Fatal("the clipped input escapes HTML characters the original did not need escaped")
	}
	if EstimateBlock(&out[0]) > 600 || EstimateBlock(&out[1]) > 600 {
		t.Fatalf("clipped blocks estimate %d and %d tokens, limit 500", EstimateBlock(&out[0]), EstimateBlock(&out[1]))
	}
	if out[1].ToolUseID != "t1" || !out[1].IsError || !strings.Contains(out[1].Content[0].Text, "omitted by Recall") {
		t.Fatalf("clipped tool_result %+v", out[1])
	}
	if string(out[2].Input) != string(c[2].Input) {
		t.Fatal("an input that is not JSON was rewritten")
	}
}
