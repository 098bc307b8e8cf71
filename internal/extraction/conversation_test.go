package extraction_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/pkg/events"
)

func u(blocks ...events.Block) events.Message {
	return events.Message{Role: events.RoleUser, Content: blocks}
}

func as(msgID string, blocks ...events.Block) events.Message {
	return events.Message{Role: events.RoleAssistant, MessageID: msgID, Content: blocks}
}

func tx(s string) events.Block { return events.Block{Type: events.BlockText, Text: s} }
func use(id string) events.Block {
	return events.Block{Type: events.BlockToolUse, ID: id, Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)}
}
func res(id string) events.Block {
	return events.Block{Type: events.BlockToolResult, ToolUseID: id, Content: events.Content{tx("out")}}
}
func think() events.Block {
	return events.Block{Type: events.BlockThinking, Thinking: "hmm", Signature: "sig"}
}

func sub(m events.Message) events.Message { m.QuerySource = events.QuerySubagent; return m }

func TestBuildConversation(t *testing.T) {
	omitted := `text("` + extraction.OmittedNote + `")`
	tests := []struct {
		name    string
		records []events.Message
		want    string
	}{
		{"streamed records merge", []events.Message{
			u(tx("go")), as("m1", think()), as("m1", tx("ok")), as("m1", use("a")), u(res("a")), as("m2", tx("done")),
		}, `user: text("go")
assistant: text("ok") use(a)
user: result(a)
assistant: text("done")
`},
		{"stream continued after a result", []events.Message{
			u(tx("go")), as("m1", use("a")), u(res("a")), as("m1", use("b")), u(res("b")), as("m2", tx("done")),
		}, `user: text("go")
assistant: use(a) use(b)
user: result(a) result(b)
assistant: text("done")
`},
		{"different responses stay apart", []events.Message{
			u(tx("go")), as("m1", use("a")), u(res("a")), as("m2", use("b")), u(res("b")),
		}, `user: text("go")
assistant: use(a)
user: result(a)
assistant: use(b)
user: result(b)
`},
		{"trailing unanswered tool_use dropped", []events.Message{
			u(tx("go")), as("m1", tx("let me look"), use("a")),
		}, `user: text("go")
assistant: text("let me look")
`},
		{"trailing tool_use only: message dropped", []events.Message{
			u(tx("go")), as("m1", tx("hi")), u(tx("more")), as("m2", use("a")),
		}, `user: text("go")
assistant: text("hi")
user: text("more")
`},
		{"missing result gets a synthetic one", []events.Message{
			u(tx("go")), as("m1", use("a"), use("b")), u(res("b"), tx("stop that")),
		}, `user: text("go")
assistant: use(a) use(b)
user: result!(a) result(b) text("stop that")
`},
		{"orphan results dropped", []events.Message{
			u(res("zz"), tx("go")), as("m1", use("a")), u(res("a"), res("a"), res("q")),
		}, `user: text("go")
assistant: use(a)
user: result(a)
`},
		{"subagent records skipped", []events.Message{
			u(tx("go")), sub(u(tx("sub task"))), sub(as("s1", tx("sub reply"))), as("m1", tx("done")),
		}, `user: text("go")
assistant: text("done")
`},
		{"starts with assistant", []events.Message{
			as("m1", tx("resumed")), u(tx("go")),
		}, `user: ` + omitted + `
assistant: text("resumed")
user: text("go")
`},
		{"results first in user messages", []events.Message{
			u(tx("go")), as("m1", use("a")), u(tx("also this")), u(res("a")),
		}, `user: text("go")
assistant: use(a)
user: result(a) text("also this")
`},
		{"thinking-only and empty records vanish", []events.Message{
			u(tx("go")), as("m1", think()), u(tx("")), as("m2", tx("x")),
		}, `user: text("go")
assistant: text("x")
`},
		{"empty", nil, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := json.Marshal(tt.records)
			got := extraction.String(extraction.BuildConversation(tt.records, -1, 0))
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
			after, _ := json.Marshal(tt.records)
			if string(before) != string(after) {
				t.Error("BuildConversation modified its input")
			}
		})
	}
}

func TestBuildConversationCap(t *testing.T) {
	big := strings.Repeat("x", 4000) // 1000 tokens
	records := []events.Message{
		u(tx("first " + big)),             // 0
		as("m1", tx("a1 "+big), use("a")), // 1
		u(res("a")),                       // 2
		as("m1", use("b")),                // 3 (same response)
		u(res("b"), tx("next "+big)),      // 4
		as("m2", tx("a2 "+big)),           // 5
		u(tx("third " + big)),             // 6
		as("m3", tx("a3 "+big)),           // 7
	}
	tests := []struct {
		name           string
		lastSummarized int
		max            int64
		want           string
	}{
		{"no cap", -1, 0, `user: text
assistant: text use(a) use(b)
user: result(a) result(b) text
assistant: text
user: text
assistant: text
`},
		{"under cap", -1, 100000, `user: text
assistant: text use(a) use(b)
user: result(a) result(b) text
assistant: text
user: text
assistant: text
`},
		{"drop oldest, tool pair dropped whole", 7, 4500, `user: note text
assistant: text
user: text
assistant: text
`},
		{"cut lands on an assistant turn: drop it too", 7, 3500, `user: note text
assistant: text
`},
		{"keep everything after the summarized point", 3, 1500, `user: note text
assistant: text
user: text
assistant: text
`},
		{"nothing summarized: nothing dropped", -1, 1500, `user: text
assistant: text use(a) use(b)
user: result(a) result(b) text
assistant: text
user: text
assistant: text
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conv := extraction.BuildConversation(records, tt.lastSummarized, tt.max)
			var b strings.Builder
			for _, m := range conv {
				b.WriteString(m.Role + ":")
				for _, bl := range m.Content {
					switch {
					case bl.Type == events.BlockText && bl.Text == extraction.OmittedNote:
						b.WriteString(" note")
					case bl.Type == events.BlockText:
						b.WriteString(" text")
					case bl.Type == events.BlockToolUse:
						b.WriteString(" use(" + bl.ID + ")")
					case bl.Type == events.BlockToolResult:
						b.WriteString(" result(" + bl.ToolUseID + ")")
					}
				}
				b.WriteString("\n")
			}
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

// TestBuildConversationInvariants checks the API's rules on random
// transcripts: roles alternate starting with a user message, every tool_use
// is answered in the next message and every tool_result answers one, no
// thinking is sent, and the newest record is never cut.
func TestBuildConversationInvariants(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 500 {
		records := randomRecords(r, 30)
		lastSummarized := r.IntN(len(records)+1) - 1
		conv := extraction.BuildConversation(records, lastSummarized, int64(r.IntN(400)))
		dump := extraction.String(conv)
		var pending map[string]bool
		for i, m := range conv {
			wantRole := events.RoleUser
			if i%2 == 1 {
				wantRole = events.RoleAssistant
			}
			if m.Role != wantRole || len(m.Content) == 0 {
				t.Fatalf("transcript %d: message %d role %s (%d blocks):\n%s", n, i, m.Role, len(m.Content), dump)
			}
			uses := map[string]bool{}
			for _, b := range m.Content {
				switch b.Type {
				case events.BlockThinking, events.BlockRedactedThinking:
					t.Fatalf("transcript %d: thinking sent", n)
				case events.BlockToolUse:
					uses[b.ID] = true
				case events.BlockToolResult:
					if !pending[b.ToolUseID] {
						t.Fatalf("transcript %d: message %d answers %s, not pending:\n%s", n, i, b.ToolUseID, dump)
					}
					delete(pending, b.ToolUseID)
				}
			}
			if len(pending) > 0 {
				t.Fatalf("transcript %d: message %d leaves %v unanswered:\n%s", n, i, pending, dump)
			}
			pending = uses
		}
		if len(pending) > 0 {
			t.Fatalf("transcript %d: final tool_use unanswered:\n%s", n, dump)
		}
	}
}

// randomRecords is a random transcript of up to n records: text, thinking,
// tool uses answered or not, stray results, subagent records.
func randomRecords(r *rand.Rand, n int) []events.Message {
	var records []events.Message
	nextID := 0
	var open []string
	for range r.IntN(n) {
		switch r.IntN(6) {
		case 0, 1:
			var blocks []events.Block
			for _, id := range open {
				if r.IntN(4) > 0 {
					blocks = append(blocks, res(id))
				}
			}
			open = nil
			if r.IntN(2) == 0 || len(blocks) == 0 {
				blocks = append(blocks, tx(strings.Repeat("u", r.IntN(400))))
			}
			if r.IntN(10) == 0 {
				blocks = append(blocks, res("stray"))
			}
			records = append(records, u(blocks...))
		case 2, 3, 4:
			var blocks []events.Block
			if r.IntN(3) == 0 {
				blocks = append(blocks, think())
			}
			if r.IntN(2) == 0 {
				blocks = append(blocks, tx(strings.Repeat("a", r.IntN(400))))
			}
			for range r.IntN(3) {
				id := fmt.Sprintf("t%d", nextID)
				nextID++
				open = append(open, id)
				blocks = append(blocks, use(id))
			}
			records = append(records, as(fmt.Sprintf("m%d", r.IntN(4)), blocks...))
		case 5:
			records = append(records, sub(u(tx("sub"))))
		}
	}
	return records
}

// An extraction reads the session from where the previous one's
// conversation started (BuildWindow's first): on random transcripts that
// grew in between, with the summarized point moving forward, the
// conversation read from that window equals the one built from the whole
// transcript.
func TestBuildWindowMatchesWholeTranscript(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	windows := 0
	for n := range 4000 {
		records := randomRecords(r, 60)
		if len(records) < 2 {
			continue
		}
		maxTokens := int64(20 + r.IntN(600))
		n1 := 1 + r.IntN(len(records))
		sum1 := r.IntN(n1+1) - 1
		_, from := extraction.BuildWindow(records[:n1], sum1, maxTokens, false)
		if from > 0 {
			windows++
		}
		sum2 := sum1 + r.IntN(len(records)-sum1)
		whole := extraction.String(extraction.BuildConversation(records, sum2, maxTokens))
		conv, next := extraction.BuildWindow(records[from:], sum2-from, maxTokens, from > 0)
		if got := extraction.String(conv); got != whole {
			t.Fatalf("transcript %d: window from %d of %d records (first %d, then %d, summarized %d then %d, cap %d):\nwindow %s\nwhole  %s",
				n, from, len(records), n1, len(records), sum1, sum2, maxTokens, got, whole)
		}
		// The window it reports gives the same conversation again.
		at := from + next
		again, _ := extraction.BuildWindow(records[at:], sum2-at, maxTokens, at > 0)
		if got := extraction.String(again); got != whole {
			t.Fatalf("transcript %d: the next window from %d:\nwindow %s\nwhole  %s", n, at, got, whole)
		}
	}
	t.Logf("%d of the transcripts were read from a window", windows)
	if windows < 300 {
		t.Fatalf("only %d of the transcripts had a window", windows)
	}
}

// A tool loop after a single prompt still gets a window (it opens on an
// assistant turn) and reading from it gives the whole transcript's
// conversation.
func TestBuildWindowToolLoop(t *testing.T) {
	records := []events.Message{u(tx("fix the build"))}
	for i := range 200 {
		id := fmt.Sprintf("t%d", i)
		records = append(records, as(fmt.Sprintf("m%d", i), tx(strings.Repeat("a", 40)), use(id)), u(res(id)))
	}
	n1, max := 300, int64(600)
	_, from := extraction.BuildWindow(records[:n1], n1-3, max, false)
	if from < n1/2 {
		t.Fatalf("the window of a %d-record tool loop starts at record %d", n1, from)
	}
	whole := extraction.String(extraction.BuildConversation(records, len(records)-3, max))
	conv, _ := extraction.BuildWindow(records[from:], len(records)-3-from, max, true)
	if got := extraction.String(conv); got != whole {
		t.Fatalf("window from %d:\n%s\nwhole:\n%s", from, got, whole)
	}
}
