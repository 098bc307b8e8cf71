package memory_test

import (
	"fmt"
	"strings"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// The trigger decides once per complete assistant response: here the context
// reaches the init threshold and grows past the update threshold, and the
// final response has no tool call (a natural break).
func ExampleTriggerState() {
	th := memory.DefaultThresholds()
	th.MinimumMessageTokensToInit, th.MinimumTokensBetweenUpdate = 100, 100
	var st memory.TriggerState
	long := strings.Repeat("word ", 120) // ≈ 150 tokens
	msgs := []events.Message{
		{UUID: "u1", Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: long}}},
		{UUID: "a1", Role: events.RoleAssistant, MessageID: "m1", StopReason: "end_turn",
			Content: events.Content{{Type: events.BlockText, Text: "Done."}}},
	}
	var out []memory.TriggerDecision
	for i := range msgs {
		out = st.Observe(memory.MessageRecord(uint64(i+1), 0, &msgs[i]), &th, out[:0])
		for _, d := range out {
			fmt.Printf("extract up to seq %d (%s), %d tokens, natural break %v\n", d.UpToSeq, d.UpToID, d.Counters.Tokens, d.Counters.NaturalBreak)
		}
	}
	// Output:
	// extract up to seq 2 (a1), 151 tokens, natural break true
}

// Edits go through the same rules as a file Edit tool, and may not touch the
// template's structure.
func ExampleApplyToolCall() {
	path := memory.NotesPath("acme", "s1")
	doc := memory.DefaultTemplate
	input := fmt.Sprintf(`{"file_path":%q,"old_string":"# Worklog\n_Step by step, what was attempted, done? Very terse summary for each step_\n","new_string":"# Worklog\n_Step by step, what was attempted, done? Very terse summary for each step_\n- read parser.go\n"}`, path)
	doc, result, err := memory.ApplyToolCall(doc, path, memory.EditToolName, []byte(input))
	fmt.Println(err == nil, strings.Contains(doc, "- read parser.go"), result != "")

	_, result, err = memory.ApplyToolCall(doc, path, "Write", []byte(`{}`))
	fmt.Println(err != nil, result)
	// Output:
	// true true true
	// true only Edit on recall://acme/s1/memory.md is allowed
}

// The reference's auto-compact threshold: a 200K window with 32K max output
// leaves 167,000 tokens.
func ExampleAutoCompactThreshold() {
	fmt.Println(memory.AutoCompactThreshold(200_000, 32_000))
	// Output: 167000
}
