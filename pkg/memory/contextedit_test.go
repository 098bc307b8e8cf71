package memory_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// editLoop is a context of one request and n tool uses (names cycling
// through tools), each result worth resultTokens, with a thinking block in
// every assistant turn and a final text answer.
func editLoop(n, resultTokens int, tools ...string) []memory.WindowEntry {
	if len(tools) == 0 {
		tools = []string{"Bash"}
	}
	var es []memory.WindowEntry
	add := func(m *events.Message) {
		m.UUID = fmt.Sprintf("r%d", len(es)+1)
		es = append(es, memory.WindowEntry{Seq: uint64(len(es) + 1), Message: m})
	}
	add(&events.Message{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "Fix the flaky test."}}})
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		in, _ := json.Marshal(map[string]string{"command": strings.Repeat("x", 400)})
		add(&events.Message{Role: events.RoleAssistant, MessageID: fmt.Sprintf("m%d", i), Content: events.Content{
			{Type: events.BlockThinking, Thinking: winFiller(50)},
			{Type: events.BlockToolUse, ID: id, Name: tools[i%len(tools)], Input: in}}})
		add(&events.Message{Role: events.RoleUser, Content: events.Content{
			{Type: events.BlockToolResult, ToolUseID: id, Content: events.Content{{Type: events.BlockText, Text: winFiller(resultTokens)}}}}})
	}
	add(&events.Message{Role: events.RoleAssistant, MessageID: "final", Content: events.Content{{Type: events.BlockText, Text: "Fixed."}}})
	return es
}

func amount(unit string, v int64) *events.EditAmount { return &events.EditAmount{Type: unit, Value: v} }
func keep(unit string, v int64) *events.EditKeep {
	return &events.EditKeep{EditAmount: events.EditAmount{Type: unit, Value: v}}
}

func TestPlanContextEdits(t *testing.T) {
	clearTools := func(f func(*events.ContextEdit)) []events.ContextEdit {
		e := events.ContextEdit{Type: events.EditClearToolUses}
		f(&e)
		return []events.ContextEdit{e}
	}
	tests := []struct {
		name      string
		es        []memory.WindowEntry
		tokens    int64
		edits     []events.ContextEdit
		results   []string // tool_use ids whose results are cleared
		inputs    int      // tool inputs cleared
		thinking  int      // thinking blocks removed
		toolUses  int      // applied cleared_tool_uses
		thinkTurn int
	}{
		{name: "below the default trigger of 100,000 tokens", es: editLoop(10, 2000), tokens: 99999, edits: memory.DefaultContextEdits()},
		{name: "defaults: all but the 3 most recent results", es: editLoop(10, 2000), tokens: 100000, edits: memory.DefaultContextEdits(),
			results: []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6"}, toolUses: 7},
		{name: "trigger in tool uses", es: editLoop(5, 100), tokens: 1, edits: clearTools(func(e *events.ContextEdit) {
			e.Trigger, e.Keep = amount(events.UnitToolUses, 5), keep(events.UnitToolUses, 2)
		}), results: []string{"t0", "t1", "t2"}, toolUses: 3},
		{name: "tool-use trigger not reached", es: editLoop(4, 100), tokens: 1e6, edits: clearTools(func(e *events.ContextEdit) {
			e.Trigger = amount(events.UnitToolUses, 5)
		})},
		{name: "keep larger than the tool uses present", es: editLoop(4, 2000), tokens: 2e5, edits: clearTools(func(e *events.ContextEdit) {
			e.Keep = keep(events.UnitToolUses, 10)
		})},
		{name: "keep 0 clears every result", es: editLoop(3, 2000), tokens: 2e5, edits: clearTools(func(e *events.ContextEdit) {
			e.Keep = keep(events.UnitToolUses, 0)
		}), results: []string{"t0", "t1", "t2"}, toolUses: 3},
		{name: "exclude one tool", es: editLoop(6, 2000, "Bash", "Read"), tokens: 2e5, edits: clearTools(func(e *events.ContextEdit) {
			e.Keep, e.ExcludeTools = keep(events.UnitToolUses, 0), []string{"Read"}
		}), results: []string{"t0", "t2", "t4"}, toolUses: 3},
		{name: "exclude every tool", es: editLoop(6, 2000, "Bash", "Read"), tokens: 2e5, edits: clearTools(func(e *events.ContextEdit) {
			e.ExcludeTools = []string{"Bash", "Read"}
		})},
		{name: "clear inputs too", es: editLoop(5, 2000), tokens: 2e5, edits: clearTools(func(e *events.ContextEdit) {
			e.ClearToolInputs = true
		}), results: []string{"t0", "t1"}, inputs: 2, toolUses: 2},
		{name: "clear_at_least not reachable: nothing cleared", es: editLoop(5, 2000), tokens: 2e5, edits: clearTools(func(e *events.ContextEdit) {
			e.ClearAtLeast = amount(events.UnitInputTokens, 5000)
		})},
		{name: "clear_at_least reached", es: editLoop(5, 2000), tokens: 2e5, edits: clearTools(func(e *events.ContextEdit) {
			e.ClearAtLeast = amount(events.UnitInputTokens, 3000)
		}), results: []string{"t0", "t1"}, toolUses: 2},
		{name: "thinking: keep the last turn by default", es: editLoop(4, 10), edits: []events.ContextEdit{{Type: events.EditClearThinking}},
			thinking: 3, thinkTurn: 3},
		{name: "thinking: keep all", es: editLoop(4, 10), edits: []events.ContextEdit{{Type: events.EditClearThinking, Keep: &events.EditKeep{All: true}}}},
		{name: "thinking: keep 2 turns", es: editLoop(4, 10), edits: []events.ContextEdit{{Type: events.EditClearThinking, Keep: keep(events.UnitThinkingTurns, 2)}},
			thinking: 2, thinkTurn: 2},
		{name: "both strategies", es: editLoop(5, 2000), tokens: 2e5, edits: []events.ContextEdit{
			{Type: events.EditClearThinking, Keep: keep(events.UnitThinkingTurns, 0)}, {Type: events.EditClearToolUses}},
			results: []string{"t0", "t1"}, thinking: 5, toolUses: 2, thinkTurn: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := memory.ContextEditInput{Entries: tt.es, Tokens: tt.tokens, Edits: tt.edits}
			p := memory.PlanContextEdits(in)
			var results []string
			var inputs, thinking, toolUses, turns int
			var freed int64
			for _, c := range p.Clear {
				freed += c.Tokens
				switch c.Kind {
				case events.ClearToolResult:
					results = append(results, c.ToolUseID)
					if c.Placeholder != fmt.Sprintf(events.ClearedResultText, c.UUID) || c.Action != events.ActionReplace {
						t.Errorf("result placeholder %q", c.Placeholder)
					}
				case events.ClearToolInput:
					inputs++
				case events.ClearThinking:
					thinking++
				}
			}
			for _, a := range p.Applied {
				toolUses += a.ClearedToolUses
				turns += a.ClearedThinkingTurns
			}
			if fmt.Sprint(results) != fmt.Sprint(tt.results) && !(len(results) == 0 && len(tt.results) == 0) {
				t.Errorf("cleared results %v, want %v", results, tt.results)
			}
			if inputs != tt.inputs || thinking != tt.thinking || toolUses != tt.toolUses || turns != tt.thinkTurn {
				t.Errorf("inputs %d thinking %d tool uses %d turns %d, want %d %d %d %d", inputs, thinking, toolUses, turns, tt.inputs, tt.thinking, tt.toolUses, tt.thinkTurn)
			}
			if freed != p.Freed {
				t.Errorf("freed %d, blocks sum to %d", p.Freed, freed)
			}
			// Deterministic, and idempotent on the edited context.
			if again := memory.PlanContextEdits(in); !reflect.DeepEqual(p, again) {
				t.Error("not deterministic")
			}
			checkEditedPairs(t, tt.es, p.Clear)
		})
	}
}

// checkEditedPairs applies the clearing and checks that every tool_result
// still answers a tool_use and that no text block changed.
func checkEditedPairs(t *testing.T, es []memory.WindowEntry, clear []events.ClearedBlock) {
	t.Helper()
	uses := map[string]bool{}
	for _, e := range es {
		m := memory.ApplyClearing(e.Message, clear)
		for j, b := range m.Content {
			switch b.Type {
			case events.BlockToolUse:
				uses[b.ID] = true
			case events.BlockToolResult:
				if !uses[b.ToolUseID] {
					t.Fatalf("tool_result %s lost its tool_use", b.ToolUseID)
				}
			case events.BlockText:
				if orig := e.Message.Content; j < len(orig) && orig[j].Type == events.BlockText && orig[j].Text != b.Text {
					t.Fatalf("text block of %s changed", m.UUID)
				}
			}
		}
		if memory.IsUserRequest(e.Message) && !reflect.DeepEqual(m.Content, e.Message.Content) {
			t.Fatalf("the user's request %s was edited", m.UUID)
		}
	}
}

func TestContextManagementValidate(t *testing.T) {
	bad := []string{
		`{"context_management":{"edits":[{"type":"clear_everything"}]}}`,
		`{"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"messages","value":3}}]}}`,
		`{"context_management":{"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"thinking_turns","value":3}}]}}`,
		`{"context_management":{"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"tool_uses","value":-1}}]}}`,
		`{"context_management":{"edits":[{"type":"clear_tool_uses_20250919","keep":"all"}]}}`,
		`{"context_management":{"edits":[{"type":"clear_tool_uses_20250919"},{"type":"clear_thinking_20251015"}]}}`,
		`{"context_management":{"edits":[{"type":"clear_thinking_20251015","exclude_tools":["Bash"]}]}}`,
		`{"context_management":{"edits":[]},"extra":1}`,
		`{"context_tokens":-5}`,
		`{} {}`,
	}
	for _, b := range bad {
		if _, err := events.DecodeEditRequest([]byte(b)); err == nil {
			t.Errorf("%s: accepted", b)
		}
	}
	good := `{"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"},{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":30000},"keep":{"type":"tool_uses","value":3},"clear_at_least":{"type":"input_tokens","value":5000},"exclude_tools":["web_search"],"clear_tool_inputs":true}]},"context_tokens":120000}`
	r, err := events.DecodeEditRequest([]byte(good))
	if err != nil || len(r.ContextManagement.Edits) != 2 || !r.ContextManagement.Edits[0].Keep.All || r.ContextManagement.Edits[1].Keep.Value != 3 {
		t.Fatalf("%+v %v", r, err)
	}
}

// A result shorter than its placeholder is not cleared: clearing it would
// grow the context.
func TestClearingSkipsShortResults(t *testing.T) {
	es := editLoop(4, 2)
	p := memory.PlanContextEdits(memory.ContextEditInput{Entries: es, Tokens: 2e5, Edits: memory.DefaultContextEdits()})
	if len(p.Clear) != 0 || len(p.Applied) != 0 {
		t.Fatalf("cleared %d blocks of tiny results: %+v", len(p.Clear), p.Clear)
	}
}
