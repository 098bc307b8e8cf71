package memory

import (
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

func user(text string) events.Message {
	return events.Message{Role: "user", Content: events.Content{{Type: events.BlockText, Text: text}}}
}

func assistant(msgID string, blocks ...events.Block) events.Message {
	return events.Message{Role: "assistant", MessageID: msgID, Content: blocks}
}

func text(s string) events.Block { return events.Block{Type: events.BlockText, Text: s} }

func toolUse(id string) events.Block {
	return events.Block{Type: events.BlockToolUse, ID: id, Name: "Bash", Input: []byte(`{}`)}
}

func toolResult(id string) events.Message {
	return events.Message{Role: "user", Content: events.Content{{Type: events.BlockToolResult, ToolUseID: id}}}
}

func TestSafePoint(t *testing.T) {
	sub := assistant("s1", toolUse("sub"))
	sub.QuerySource = events.QuerySubagent
	tests := []struct {
		name string
		msgs []events.Message
		want int
	}{
		{"empty", nil, -1},
		{"one user message", []events.Message{user("hi")}, 0},
		{"plain exchange", []events.Message{user("hi"), assistant("m1", text("hello"))}, 1},
		{"trailing tool_use without result", []events.Message{user("hi"), assistant("m1", toolUse("t1"))}, 0},
		{"tool cycle closed", []events.Message{user("hi"), assistant("m1", toolUse("t1")), toolResult("t1")}, 2},
		{"second cycle open", []events.Message{user("hi"), assistant("m1", toolUse("t1")), toolResult("t1"), assistant("m2", toolUse("t2"))}, 2},
		{"parallel calls, one result missing", []events.Message{
			user("hi"), assistant("m1", toolUse("a"), toolUse("b")), toolResult("a"),
		}, 0},
		{"parallel calls, both answered", []events.Message{
			user("hi"), assistant("m1", toolUse("a"), toolUse("b")), toolResult("a"), toolResult("b"),
		}, 3},
		{"streamed response is not split", []events.Message{
			user("hi"), assistant("m1", text("thinking")), assistant("m1", text("more")), assistant("m1", toolUse("t1")),
		}, 0},
		{"streamed response complete", []events.Message{
			user("hi"), assistant("m1", text("a")), assistant("m1", text("b")), assistant("m1", text("c")),
		}, 3},
		{"streamed response then reply", []events.Message{
			user("hi"), assistant("m1", text("a")), assistant("m1", toolUse("t")), toolResult("t"), assistant("m2", text("done")),
		}, 4},
		{"subagent messages ignored", []events.Message{user("hi"), assistant("m1", text("ok")), sub}, 1},
		{"orphan result does not open anything", []events.Message{toolResult("zzz"), user("hi")}, 1},
		// A crash left t1 unanswered; the platform went on. Once a later
		// response begins, t1 no longer pins the point.
		{"crash-orphaned tool_use passed by a later turn", []events.Message{
			user("hi"), assistant("m1", toolUse("t1")), user("are you there?"), assistant("m2", text("yes")),
		}, 3},
		{"crash-orphaned tool_use, many turns later", []events.Message{
			user("hi"), assistant("m1", toolUse("t1")), user("again"), assistant("m2", toolUse("t2")), toolResult("t2"),
			assistant("m3", text("done")), user("next"),
		}, 6},
		{"orphaned parallel call passed by the next response", []events.Message{
			user("hi"), assistant("m1", toolUse("a"), toolUse("b")), toolResult("a"), assistant("m2", text("went on")),
		}, 3},
		{"an open call of the current response still holds the point", []events.Message{
			user("hi"), assistant("m1", toolUse("t1")), user("again"), assistant("m2", toolUse("t2")),
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SafePoint(tc.msgs); got != tc.want {
				t.Errorf("SafePoint = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSafePoints lists every point; a prefix cut inside a streamed response
// ends at a point SafePoint takes for final, which is why a cut inside a
// transcript must come from SafePoints over what follows too.
func TestSafePoints(t *testing.T) {
	msgs := []events.Message{
		user("write it"),                  // 0: safe
		assistant("m1", text("part one")), // 1: continued by 2
		assistant("m1", toolUse("t1")),    // 2: waits for t1
		toolResult("t1"),                  // 3: safe
		assistant("m2", text("done")),     // 4: safe (the end)
	}
	var got []int
	for i := range SafePoints(msgs) {
		got = append(got, i)
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 3 || got[2] != 4 {
		t.Fatalf("SafePoints = %v, want [0 3 4]", got)
	}
	if sp := SafePoint(msgs[:2]); sp != 1 {
		t.Fatalf("SafePoint of the prefix = %d, want 1 (it cannot see message 2)", sp)
	}
	for i := range SafePoints(msgs) {
		if i > 0 {
			break // stopping early must not panic
		}
	}
}
