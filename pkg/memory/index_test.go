package memory

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/recallhq/recall/pkg/events"
)

func textMsg(role, s string) *events.Message {
	return &events.Message{Role: role, Content: events.Content{{Type: events.BlockText, Text: s}}}
}

func TestIndexInputKeepsOnlyUserAndAssistantText(t *testing.T) {
	msgs := []*events.Message{
		textMsg(events.RoleUser, "Fix the login bug."),
		{Role: events.RoleAssistant, Content: events.Content{
			{Type: events.BlockThinking, Thinking: "SECRET-THINKING"},
			{Type: events.BlockText, Text: "Looking at auth.go."},
			{Type: events.BlockToolUse, ID: "t1", Name: "Read", Input: []byte(`{"path":"TOOL-INPUT"}`)},
		}},
		{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: "t1", Content: events.Content{{Type: events.BlockText, Text: "TOOL-RESULT"}}}}},
		textMsg(events.RoleUser, "<session-references>\nREFERENCE\n</session-references>"),
		textMsg(events.RoleAssistant, "Fixed."),
	}
	got := IndexInput(msgs, 0)
	want := "User: Fix the login bug.\n\nAssistant: Looking at auth.go.\n\nAssistant: Fixed."
	if got != want {
		t.Fatalf("IndexInput:\n%q\nwant\n%q", got, want)
	}
}

func TestIndexInputKeepsTheTail(t *testing.T) {
	var msgs []*events.Message
	for i := 0; i < 200; i++ {
		msgs = append(msgs, textMsg(events.RoleUser, strings.Repeat("é", 50)+" request"))
	}
	msgs = append(msgs, textMsg(events.RoleUser, "THE LATEST REQUEST"))
	got := IndexInput(msgs, 1000)
	if len(got) > 1000 || !strings.HasSuffix(got, "THE LATEST REQUEST") || !utf8.ValidString(got) || !strings.HasPrefix(got, "User: ") {
		t.Fatalf("tail of %d bytes: %.80q…", len(got), got)
	}
}

func TestParseIndexOutput(t *testing.T) {
	good := `{"name": "Confirm Button Refactor!", "description": "Refactor.", "summary": "Did it.", "tags": ["UI", "ui", " react "]}`
	md, err := ParseIndexOutput("Sure:\n```json\n" + good + "\n```")
	if err != nil {
		t.Fatal(err)
	}
	if md.Name != "confirm-button-refactor" || strings.Join(md.Tags, ",") != "ui,react" {
		t.Fatalf("%+v", md)
	}
	for _, c := range []struct{ in, want string }{
		{"no json here", "no JSON object"},
		{`{"name": "a", "description": "b", "summary": "c"}`, `missing field "tags"`},
		{`{"name": 1, "description": "b", "summary": "c", "tags": ["x"]}`, `"name" must be a string`},
		{`{"name": "a", "description": "b", "summary": "c", "tags": []}`, `"tags" has 0 distinct tags`},
		{`{"name": "a", "description": "b", "summary": "c", "tags": "x"}`, `array of strings`},
		{`{"name": "a", "description": "", "summary": "c", "tags": ["x"]}`, `"description" has 0 characters`},
		{`{"name": "a", "description": "b", "summary": "c", "tags": ["x"], "extra": 1}`, `unknown field "extra"`},
		{`{"name": "!!!", "description": "b", "summary": "c", "tags": ["x"]}`, `no letters or digits`},
		{`{"name": "` + strings.Repeat("a", IndexNameMax+1) + `", "description": "b", "summary": "c", "tags": ["x"]}`, `"name" has 65 characters`},
	} {
		_, err := ParseIndexOutput(c.in)
		if !errors.Is(err, ErrIndexOutput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Confirm Button Refactor":   "confirm-button-refactor",
		"  fix: the  API (v2)  ":    "fix-the-api-v2",
		"Café crème":                "caf-cr-me",
		strings.Repeat("word ", 30): strings.TrimSuffix(strings.Repeat("word-", 12), "-") + "-word",
	} {
		if got := Slug(in); got != want || len(got) > IndexNameMax {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestNameVariants: a session's variants are the slug, then the slug with a
// 6- and a 12-hex digest of its id — the same on every call, different
// between sessions, slugs within the name limit even for the longest
// slug; a held variant (or a numbered name of before) is recognised.
func TestNameVariants(t *testing.T) {
	long := strings.Repeat("a", IndexNameMax)
	for _, slug := range []string{"fix-login", long, strings.Repeat("ab-", 21) + "a"} {
		a, b := NameVariants(slug, "s1"), NameVariants(slug, "s2")
		if len(a) != 3 || a[0] != slug || a[1] == b[1] || a[2] == b[2] {
			t.Fatalf("%q: %q / %q", slug, a, b)
		}
		if again := NameVariants(slug, "s1"); strings.Join(again, " ") != strings.Join(a, " ") {
			t.Fatalf("not deterministic: %q then %q", a, again)
		}
		for _, v := range a {
			if Slug(v) != v || len(v) > IndexNameMax {
				t.Errorf("variant %q is not a slug within %d bytes", v, IndexNameMax)
			}
			if !IsNameVariant(v, slug, "s1") {
				t.Errorf("%q not recognised as s1's", v)
			}
		}
		if IsNameVariant(b[1], slug, "s1") {
			t.Errorf("s2's %q recognised as s1's", b[1])
		}
	}
	if !IsNameVariant("fix-login-7", "fix-login", "s1") || IsNameVariant("fix-login-x7", "fix-login", "s1") || IsNameVariant("other", "fix-login", "s1") {
		t.Fatal("numbered names of before")
	}
}

func TestFindRefs(t *testing.T) {
	refs := FindRefs("Like @@confirm-button-refactor did, and @@abc~2.\n@@release-notes: which version shipped?\nmail a@@b, bare @@ and @@x~y")
	if len(refs) != 3 {
		t.Fatalf("%+v", refs)
	}
	if refs[0].Target != "confirm-button-refactor" || refs[0].Ancestors != 0 || refs[0].Question != "" {
		t.Errorf("ref 0: %+v", refs[0])
	}
	if refs[1].Target != "abc" || refs[1].Ancestors != 2 || refs[1].Raw != "@@abc~2" {
		t.Errorf("ref 1: %+v", refs[1])
	}
	if refs[2].Target != "release-notes" || refs[2].Question != "which version shipped?" {
		t.Errorf("ref 2: %+v", refs[2])
	}
	if _, err := ParseRef("x~99"); err == nil {
		t.Error("~99 accepted")
	}
}

func TestFuzzyMatch(t *testing.T) {
	for _, c := range []struct {
		q, name string
		want    bool
	}{
		{"confirm", "refactor-confirm-button", true},
		{"conf butt", "refactor-confirm-button", true},
		{"Confirm Button", "refactor-confirm-button", true},
		{"login", "refactor-confirm-button", false},
		{"", "x", false},
	} {
		if got := FuzzyMatch(c.q, c.name); got != c.want {
			t.Errorf("FuzzyMatch(%q, %q) = %v", c.q, c.name, got)
		}
	}
}

func TestOfflineIndexIsValidAndDeterministic(t *testing.T) {
	input := IndexInput([]*events.Message{
		textMsg(events.RoleUser, "Refactor the confirm button component so the dialog closes on escape."),
		textMsg(events.RoleAssistant, "Done."),
		textMsg(events.RoleUser, "Keep the confirm button red."),
	}, 0)
	md := OfflineIndex(input)
	if md.Name != "refactor-confirm-button-component" || !strings.Contains(md.Summary, "Keep the confirm button red.") {
		t.Fatalf("%+v", md)
	}
	if md2 := OfflineIndex(input); strings.Join(md2.Tags, ",") != strings.Join(md.Tags, ",") {
		t.Fatal("not deterministic")
	}
	if OfflineIndex("").Name == "" {
		t.Fatal("empty input: no name")
	}
}

func TestBuildQueryContextBudget(t *testing.T) {
	var recs []Passage
	for i := 0; i < 100; i++ {
		recs = append(recs, Passage{Seq: uint64(i + 1), Role: "user", Text: strings.Repeat("x", 400)})
	}
	qc := BuildQueryContext("# Notes\nthe notes", []string{"an earlier summary"}, recs, 2000)
	if qc.Tokens > 2000 || qc.Truncated == 0 || qc.Passages[0].Role != "notes" || qc.Passages[1].Role != "summary" {
		t.Fatalf("tokens %d truncated %d first %+v", qc.Tokens, qc.Truncated, qc.Passages[0])
	}
	if last := qc.Passages[len(qc.Passages)-1]; last.Seq != 100 {
		t.Fatalf("the newest record is not kept: %+v", last)
	}
	if !strings.HasPrefix(qc.Text, "[1] notes: # Notes") {
		t.Fatalf("text: %.60q", qc.Text)
	}
}

func TestCitationsAndExtractiveAnswer(t *testing.T) {
	if got := Citations("See [2] and [9][2], not [0].", 5); len(got) != 1 || got[0] != 1 {
		t.Fatalf("Citations: %v", got)
	}
	ps := []Passage{{Text: "We chose Postgres."}, {Text: "The button is red."}, {Text: "Unrelated."}}
	ans, idx := ExtractiveAnswer("What colour is the button?", ps, 3)
	if len(idx) != 1 || idx[0] != 1 || !strings.Contains(ans, "[2]") {
		t.Fatalf("%q %v", ans, idx)
	}
	if _, idx := ExtractiveAnswer("quantum", ps, 3); idx != nil {
		t.Fatal("answered from nothing")
	}
}

func TestTurnEndAndRequests(t *testing.T) {
	if !IsTurnEnd(&events.Message{Role: events.RoleAssistant, StopReason: "end_turn", Content: events.Content{{Type: events.BlockText, Text: "ok"}}}) {
		t.Error("end_turn")
	}
	if IsTurnEnd(&events.Message{Role: events.RoleAssistant, StopReason: "tool_use"}) || IsTurnEnd(&events.Message{Role: events.RoleAssistant}) {
		t.Error("tool_use or streaming counted as a turn end")
	}
	if CountsAsIndexRequest(textMsg(events.RoleUser, "<session-references>\nx")) || !CountsAsIndexRequest(textMsg(events.RoleUser, "do it")) {
		t.Error("CountsAsIndexRequest")
	}
}
