package memory

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// Builders of context messages for the validator's tests.
func userText(s string) *events.Message {
	return &events.Message{UUID: "u-" + s, Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: s}}}
}

func asstText(s string) *events.Message {
	return &events.Message{UUID: "a-" + s, Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockText, Text: s}}}
}

func asstUse(ids ...string) *events.Message {
	m := &events.Message{UUID: "use-" + ids[0], Role: events.RoleAssistant}
	for _, id := range ids {
		m.Content = append(m.Content, events.Block{Type: events.BlockToolUse, ID: id, Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)})
	}
	return m
}

func userResult(ids ...string) *events.Message {
	m := &events.Message{UUID: "res-" + ids[0], Role: events.RoleUser}
	for _, id := range ids {
		m.Content = append(m.Content, events.Block{Type: events.BlockToolResult, ToolUseID: id, Content: events.Content{{Type: events.BlockText, Text: "ok"}}})
	}
	return m
}

func withBlocks(role string, bs ...events.Block) *events.Message {
	return &events.Message{UUID: "b", Role: role, Content: bs}
}

func TestValidateContext(t *testing.T) {
	summary := userText("summary")
	for _, tc := range []struct {
		name string
		msgs []*events.Message
		rule string // "" = valid
	}{
		{"summary alone", []*events.Message{summary}, ""},
		{"a tool loop", []*events.Message{summary, asstUse("a"), userResult("a"), asstText("done")}, ""},
		{"parallel calls answered together", []*events.Message{summary, asstUse("a", "b"), userResult("b", "a")}, ""},
		{"streamed siblings answered after both", []*events.Message{summary, asstUse("a"), asstUse("b"), userResult("a"), userResult("b")}, ""},
		{"interleaved stream", []*events.Message{summary, asstUse("a"), userResult("a"), asstUse("b"), userResult("b")}, ""},
		{"final call still running", []*events.Message{summary, asstUse("a"), userResult("a"), asstUse("b")}, ""},
		{"a correction after the results", []*events.Message{summary, asstUse("a"), userResult("a"), userText("no, port 8081")}, ""},
		{"signed thinking", []*events.Message{summary, withBlocks(events.RoleAssistant, events.Block{Type: events.BlockThinking, Thinking: "hmm", Signature: "sig"}, events.Block{Type: events.BlockText, Text: "ok"})}, ""},

		{"orphan tool_use two turns back", []*events.Message{summary, asstUse("a"), userText("are you there?"), asstText("yes")}, RuleUnanswered},
		{"orphan tool_result", []*events.Message{summary, asstText("x"), userResult("zz")}, RuleOrphanResult},
		{"result two turns late", []*events.Message{summary, asstUse("a"), userText("hi"), asstText("x"), userResult("a")}, RuleUnanswered},
		{"answered twice", []*events.Message{summary, asstUse("a"), userResult("a"), userResult("a")}, RuleOrphanResult},
		{"duplicate tool_use id", []*events.Message{summary, asstUse("a"), userResult("a"), asstUse("a"), userResult("a")}, RuleToolUse},
		{"text before results", []*events.Message{summary, asstUse("a"), userText("wait"), userResult("a")}, RuleResultsFirst},
		{"starts with the assistant", []*events.Message{asstText("x"), userText("y")}, RuleFirstTurnUser},
		{"empty message", []*events.Message{summary, {UUID: "e", Role: events.RoleAssistant}}, RuleEmptyMessage},
		{"blank text", []*events.Message{summary, asstText(" \n")}, RuleEmptyBlock},
		{"blank text in a result", []*events.Message{summary, asstUse("a"), withBlocks(events.RoleUser, events.Block{Type: events.BlockToolResult, ToolUseID: "a", Content: events.Content{{Type: events.BlockText}}})}, RuleEmptyBlock},
		{"unsigned thinking", []*events.Message{summary, withBlocks(events.RoleAssistant, events.Block{Type: events.BlockThinking, Thinking: "hmm"})}, RuleEmptyBlock},
		{"thinking in a user turn", []*events.Message{summary, withBlocks(events.RoleUser, events.Block{Type: events.BlockThinking, Thinking: "hmm", Signature: "s"})}, RuleBlockPlace},
		{"tool_result in an assistant turn", []*events.Message{summary, withBlocks(events.RoleAssistant, events.Block{Type: events.BlockToolResult, ToolUseID: "a"})}, RuleBlockPlace},
		{"tool_use without input", []*events.Message{summary, withBlocks(events.RoleAssistant, events.Block{Type: events.BlockToolUse, ID: "a", Name: "Bash"}), userResult("a")}, RuleToolUse},
		{"unknown role", []*events.Message{summary, {UUID: "s", Role: "system", Content: events.Content{{Type: events.BlockText, Text: "x"}}}}, RuleRole},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateContext(tc.msgs)
			var ce *ContextError
			switch {
			case tc.rule == "" && err != nil:
				t.Fatalf("valid context rejected: %v", err)
			case tc.rule != "" && (!errors.As(err, &ce) || ce.Rule != tc.rule || !errors.Is(err, ErrInvalidContext)):
				t.Fatalf("got %v, want a %s error", err, tc.rule)
			}
			served, repairs := RepairContext(tc.msgs)
			if tc.rule == "" && len(repairs) > 0 {
				t.Fatalf("a valid context was repaired: %+v", repairs)
			}
			if tc.rule == RuleFirstTurnUser {
				return // not repaired: Recall's contexts start with the summary
			}
			if err := ValidateContext(messagesOf(served)); err != nil {
				t.Fatalf("repaired context still invalid: %v", err)
			}
		})
	}
}

func TestRepairOrphanToolUse(t *testing.T) {
	in := []*events.Message{userText("summary"), asstUse("a"), userText("are you there?"), asstText("yes")}
	served, repairs := RepairContext(in)
	if len(served) != 5 || served[2].From != -1 || served[3].From != 2 {
		t.Fatalf("want a synthetic result right after the orphan, got %+v", served)
	}
	b := served[2].Message.Content[0]
	if b.Type != events.BlockToolResult || b.ToolUseID != "a" || !b.IsError || b.Content[0].Text != InterruptedResult {
		t.Fatalf("synthetic block %+v", b)
	}
	if len(repairs) != 1 || repairs[0].Rule != RuleUnanswered {
		t.Fatalf("repairs %+v", repairs)
	}
	if in[2].Content[0].Text != "are you there?" || len(in) != 4 {
		t.Fatal("RepairContext modified its input")
	}
	again, _ := RepairContext(in)
	if again[2].Message.UUID != served[2].Message.UUID {
		t.Fatal("synthetic uuid is not deterministic")
	}
}

func TestRepairKeepsUserText(t *testing.T) {
	in := []*events.Message{userText("summary"), asstUse("a"), withBlocks(events.RoleUser,
		events.Block{Type: events.BlockText, Text: "stop, use port 8081"},
		events.Block{Type: events.BlockToolResult, ToolUseID: "a", Content: events.Content{{Type: events.BlockText, Text: "ok"}}},
		events.Block{Type: events.BlockToolResult, ToolUseID: "ghost"})}
	served, _ := RepairContext(in)
	if err := ValidateContext(messagesOf(served)); err != nil {
		t.Fatal(err)
	}
	last := served[len(served)-1].Message
	if len(last.Content) != 2 || last.Content[0].Type != events.BlockToolResult || last.Content[1].Text != "stop, use port 8081" {
		t.Fatalf("got %+v", last.Content)
	}
}
