package memory_test

import (
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

func TestAutoCompactThreshold(t *testing.T) {
	for _, tc := range []struct{ window, out, want int64 }{
		{200000, 32000, 167000},
		{200000, 20000, 167000},
		{200000, 8000, 179000},
		{1000000, 64000, 967000},
		{0, 0, 167000},
	} {
		if got := memory.AutoCompactThreshold(tc.window, tc.out); got != tc.want {
			t.Errorf("AutoCompactThreshold(%d, %d) = %d, want %d", tc.window, tc.out, got, tc.want)
		}
	}
}

// filledNotes is the template with every section filled in.
func filledNotes() string {
	_, secs := memory.Parse(memory.DefaultTemplate)
	var b strings.Builder
	for _, s := range secs {
		s.Body = "Something real about " + s.Header + ".\n\n"
		b.WriteString(s.Text())
	}
	return b.String()
}

func TestPlanCompactionOutcomes(t *testing.T) {
	script := parseWinScript(t, `
user text=3000
asst id=m1 text=2000 usage=30000
user text=500
asst id=m2 text=800 *
user text=4000
asst id=m3 text=3000
user text=2000
asst id=m4 text=1500
`)
	base := memory.CompactInput{
		HasMemory:        true,
		Notes:            filledNotes(),
		LastSummarizedID: script.entries[script.summarized].Message.UUID,
		SummarizedIndex:  script.summarized,
		Entries:          script.entries,
		Complete:         true,
	}
	tests := []struct {
		name    string
		edit    func(*memory.CompactInput)
		outcome string
		served  bool
	}{
		{"served", func(*memory.CompactInput) {}, memory.OutcomeSessionMemory, true},
		{"no memory", func(in *memory.CompactInput) { in.HasMemory = false }, memory.OutcomeNoSessionMemory, false},
		{"blank notes", func(in *memory.CompactInput) { in.Notes = "  \n" }, memory.OutcomeNoSessionMemory, false},
		{"empty template", func(in *memory.CompactInput) { in.Notes = "\n" + memory.DefaultTemplate + "\n\n" }, memory.OutcomeEmptyTemplate, false},
		{"custom empty template", func(in *memory.CompactInput) { in.Template, in.Notes = "# A\n_a_\n", "# A\n_a_\n" }, memory.OutcomeEmptyTemplate, false},
		{"summarized id not found", func(in *memory.CompactInput) { in.SummarizedIndex = -1 }, memory.OutcomeSummarizedIDNotFound, false},
		{"resumed session", func(in *memory.CompactInput) { in.LastSummarizedID, in.SummarizedIndex = "", -1 }, memory.OutcomeResumedSession, true},
		{"threshold exceeded", func(in *memory.CompactInput) { in.Threshold = 5000 }, memory.OutcomeThresholdExceeded, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			tc.edit(&in)
			p := memory.PlanCompaction(in)
			if p.Outcome != tc.outcome {
				t.Fatalf("outcome %q, want %q (reason %q)", p.Outcome, tc.outcome, p.Reason)
			}
			if memory.Served(p.Outcome) != tc.served {
				t.Fatalf("Served(%q) = %v", p.Outcome, !tc.served)
			}
			if !tc.served && p.Reason == "" {
				t.Fatal("an outcome that is not served has no reason")
			}
			if tc.served && (p.Summary == "" || len(p.Window.Kept) == 0) {
				t.Fatalf("served without summary or kept messages: %+v", p)
			}
		})
	}
}

func TestPlanCompactionTokens(t *testing.T) {
	script := parseWinScript(t, `
user text=3000
asst id=m1 text=2000 usage=30000
user text=500
asst id=m2 text=800 *
user text=4000
asst id=m3 text=3000
user text=2000
asst id=m4 text=1500
`)
	in := memory.CompactInput{HasMemory: true, Notes: filledNotes(), LastSummarizedID: "u4", SummarizedIndex: 3, Entries: script.entries, Complete: true}
	p := memory.PlanCompaction(in)
	// Before: the usage of m1 (30,000) plus everything after it.
	if want := int64(30000 + 500 + 800 + 4000 + 3000 + 2000 + 1500); p.TokensBefore != want {
		t.Errorf("tokens before %d, want %d", p.TokensBefore, want)
	}
	// After: the summary message counts, not only the kept messages, and
	// both are padded by 4/3 as the reference's estimateMessageTokens pads.
	// Four text messages after m2 are too few: m2 (800) is kept too.
	if want := memory.Padded(memory.EstimateText(p.Summary)) + memory.Padded(11300); p.TokensAfter != want || p.Window.Tokens != 15067 {
		t.Errorf("tokens after %d, want %d", p.TokensAfter, want)
	}
	if p.Threshold != 167000 {
		t.Errorf("threshold %d", p.Threshold)
	}
	in.ContextTokens = 123456
	if p := memory.PlanCompaction(in); p.TokensBefore != 123456 {
		t.Errorf("the caller's context count was not used: %d", p.TokensBefore)
	}
	// Threshold at exactly the post estimate is exceeded (>=).
	in.Threshold = p.TokensAfter
	if p := memory.PlanCompaction(in); p.Outcome != memory.OutcomeThresholdExceeded {
		t.Errorf("threshold equal to the estimate: outcome %q", p.Outcome)
	}
}

func TestContextEstimate(t *testing.T) {
	s := parseWinScript(t, `
user text=1000
asst id=m1 think=100 usage=50000
asst id=m1 text=100 usage=51000
user text=200
`)
	// The first record of the streamed response carries the usage used.
	if got, want := memory.ContextEstimate(s.entries, -1), int64(50000+100+200); got != want {
		t.Errorf("with usage: %d, want %d", got, want)
	}
	s = parseWinScript(t, `
user text=1000 usage=99
boundary post=7000
user text=300
asst id=m1 text=200
sub id=s text=5000
`)
	if got, want := memory.ContextEstimate(s.entries, 1), int64(7000+300+200); got != want {
		t.Errorf("without usage: %d, want %d", got, want)
	}
}

func TestSummaryText(t *testing.T) {
	long := "# Current State\n_now_\n" + strings.Repeat("a line of notes that goes on\n", 400)
	in := memory.CompactInput{HasMemory: true, Notes: long, Template: "# Current State\n_now_\n", Complete: true,
		Entries:  []memory.WindowEntry{{Seq: 1, Message: &events.Message{UUID: "a", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "do it"}}}}},
		NotesRef: "memory key t.s", TranscriptRef: "session s"}
	p := memory.PlanCompaction(in)
	if !p.Truncated || !strings.Contains(p.Summary, memory.TruncationMarker) || !strings.Contains(p.Summary, "shortened") || !strings.Contains(p.Summary, "memory key t.s") {
		t.Errorf("truncated summary lacks its marker or note:\n%s", p.Summary)
	}
	if !strings.Contains(p.Summary, "session s") {
		t.Error("summary lacks the transcript hint")
	}
	if strings.Contains(p.Summary, memory.QuoteBegin) {
		t.Error("the kept request was quoted too")
	}

	// A request that cannot be kept is quoted verbatim.
	s := parseWinScript(t, `
config min=100 texts=1 max=40000
user text=300 *
user result=lost:200
asst id=m1 text=300
`)
	s.entries[0].Message.Content[0].Text = "Please keep the retry limit at 3, not 5."
	p = memory.PlanCompaction(memory.CompactInput{HasMemory: true, Notes: filledNotes(), LastSummarizedID: "u1", SummarizedIndex: 0, Entries: s.entries, Complete: true})
	if !p.Window.RequestOutside || !strings.Contains(p.Summary, memory.QuoteBegin+"\n[latest request]\nPlease keep the retry limit at 3, not 5.\n"+memory.QuoteEnd) {
		t.Errorf("request outside the window not quoted:\n%s", p.Summary)
	}
}

// TestQuoteBounded: a latest request far over the keep window (a pasted
// log) is quoted by its beginning and end within QuoteMaxTokens, naming
// its record, and the compaction is served below a threshold the quote
// alone used to break.
func TestQuoteBounded(t *testing.T) {
	log := "BEGIN-OF-PASTE\n" + strings.Repeat("2026-11-25 ERROR worker 17: connection reset by peer — retrying ✓\n", 4000) + "please fix the reconnect loop END-OF-PASTE"
	es := []memory.WindowEntry{
		{Seq: 1, Message: &events.Message{UUID: "u1", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "set up the worker"}}}},
		{Seq: 2, Message: &events.Message{UUID: "a1", Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockText, Text: "done"}}}},
		{Seq: 3, Message: &events.Message{UUID: "u2", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: log}}}},
	}
	p := memory.PlanCompaction(memory.CompactInput{HasMemory: true, Notes: filledNotes(), LastSummarizedID: "a1", SummarizedIndex: 1,
		Entries: es, Complete: true, Window: memory.WindowConfig{MaxTokens: 40000}, Threshold: 67000, ContextTokens: 90000})
	if p.Outcome != memory.OutcomeSessionMemory {
		t.Fatalf("outcome %s: %s", p.Outcome, p.Reason)
	}
	if !strings.Contains(p.Summary, "BEGIN-OF-PASTE") || !strings.Contains(p.Summary, "END-OF-PASTE") || !strings.Contains(p.Summary, "record u2 (seq 3)") {
		t.Fatalf("quote lacks its beginning, end or record:\n%.600s", p.Summary)
	}
	if q := memory.EstimateText(p.Summary) - memory.EstimateText(filledNotes()); q > memory.QuoteMaxTokens+500 {
		t.Fatalf("the quote takes %d tokens, over the bound %d", q, memory.QuoteMaxTokens)
	}
	if p.TokensAfter >= 67000 {
		t.Fatalf("served at %d tokens, over the threshold", p.TokensAfter)
	}
}

// TestLatestRequestInAResultTurn: a platform that sends the user's next
// words in the same message as the last tool results; those words are the
// latest request, not an earlier one.
func TestLatestRequestInAResultTurn(t *testing.T) {
	es := []memory.WindowEntry{
		{Seq: 1, Message: &events.Message{UUID: "u1", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "start the server on 8080"}}}},
		{Seq: 2, Message: &events.Message{UUID: "a1", Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockToolUse, ID: "t1", Name: "Bash", Input: []byte(`{}`)}}}},
		{Seq: 3, Message: &events.Message{UUID: "u2", Role: events.RoleUser, Content: events.Content{
			{Type: events.BlockToolResult, ToolUseID: "t1", Content: events.Content{{Type: events.BlockText, Text: "ok"}}},
			{Type: events.BlockText, Text: "actually, use port 9090"}}}},
	}
	w := memory.SelectWindow(memory.WindowInput{Entries: es, Start: 3, Complete: true}, memory.WindowConfig{})
	if w.LatestRequest != 2 {
		t.Fatalf("latest request %d, want 2 (the words sent with the results)", w.LatestRequest)
	}
}
