// Package benchgen generates deterministic, realistic transcript events for
// Recall's benchmarks: conversations alternating user prompts, assistant
// turns with thinking, text and tool_use blocks, and tool_result turns, with
// 0.5–2 KB of JSON data per event. It depends only on pkg/events, so
// micro-benchmarks in any package can use it.
package benchgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/recallhq/recall/pkg/events"
)

// words is the vocabulary of generated prose: code-session English, so
// sizes and character mixes resemble real transcripts.
var words = strings.Fields(`the a to of and in is for that this with on it we file function test error
	build run go package return value config session memory stream subject nats jetstream consumer
	should would could fix update read write check handler request reply tool result output input
	because then when after before each every line lines change diff struct type field method call
	interface context cancel timeout retry ack sequence partition worker trigger extract compact`)

// Gen produces the events. The same seed yields the same events (except
// their time attribute). It is not safe for concurrent use.
type Gen struct {
	r     *rand.Rand
	turn  map[string]int
	msgID map[string]string
	seq   int
}

// New returns a generator seeded with seed.
func New(seed uint64) *Gen {
	return &Gen{r: rand.New(rand.NewPCG(seed, 0x5eed)), turn: map[string]int{}, msgID: map[string]string{}}
}

func (g *Gen) prose(minBytes, maxBytes int) string {
	n := minBytes + g.r.IntN(maxBytes-minBytes+1)
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[g.r.IntN(len(words))])
	}
	return b.String()
}

// Message returns the next message of session's conversation: turn t is a
// user prompt (t%4 == 0), an assistant tool call, its tool result, or an
// assistant answer. UUIDs are "<session>-m<turn>".
func (g *Gen) Message(session string) events.Message {
	t := g.turn[session]
	g.turn[session] = t + 1
	g.seq++
	uuid := fmt.Sprintf("%s-m%06d", session, t)
	m := events.Message{UUID: uuid, QuerySource: events.QueryMain}
	switch t % 4 {
	case 0: // user prompt
		m.Role = events.RoleUser
		m.Content = events.Content{{Type: events.BlockText, Text: g.prose(300, 1200)}}
	case 1: // assistant: thinking + text + tool_use
		m.Role = events.RoleAssistant
		m.MessageID = fmt.Sprintf("msg_%s_%d", session, t)
		m.Model = "claude-sonnet-4-5"
		m.StopReason = "tool_use"
		in, _ := json.Marshal(map[string]any{"file_path": "/src/" + words[g.r.IntN(len(words))] + ".go", "old_string": g.prose(20, 120), "new_string": g.prose(20, 160)})
		m.Content = events.Content{
			{Type: events.BlockThinking, Thinking: g.prose(100, 400), Signature: "sig" + fmt.Sprint(g.seq)},
			{Type: events.BlockText, Text: g.prose(60, 300)},
			{Type: events.BlockToolUse, ID: fmt.Sprintf("toolu_%s_%d", session, t), Name: "Edit", Input: in},
		}
		m.Usage = &events.Usage{InputTokens: int64(2000 + 500*t), OutputTokens: int64(100 + g.r.IntN(400)), CacheReadInputTokens: int64(1000 * t)}
	case 2: // user tool_result
		m.Role = events.RoleUser
		m.Content = events.Content{{Type: events.BlockToolResult, ToolUseID: fmt.Sprintf("toolu_%s_%d", session, t-1),
			Content: events.Content{{Type: events.BlockText, Text: g.prose(200, 1400)}}}}
	case 3: // assistant text answer
		m.Role = events.RoleAssistant
		m.MessageID = fmt.Sprintf("msg_%s_%d", session, t)
		m.Model = "claude-sonnet-4-5"
		m.StopReason = "end_turn"
		m.Content = events.Content{{Type: events.BlockText, Text: g.prose(200, 1000)}}
		m.Usage = &events.Usage{InputTokens: int64(2500 + 500*t), OutputTokens: int64(100 + g.r.IntN(400))}
	}
	return m
}

// Event wraps the next message of session in a CloudEvent as a platform
// would submit it (no tenant extension: Recall sets it).
func (g *Gen) Event(session string) event.Event {
	m := g.Message(session)
	e := event.New()
	e.SetID(m.UUID)
	e.SetSource("recall-bench")
	e.SetType(events.TypeMessage)
	e.SetSubject(session)
	e.SetTime(time.Now())
	data, _ := json.Marshal(m)
	// The data as a JSON value, as platforms send it: SetData with a
	// []byte would mark it binary and a structured event would carry it as
	// data_base64.
	e.SetDataContentType(event.ApplicationJSON)
	e.DataEncoded = data
	return e
}

// Interleaved returns n events spread round-robin over sessions, the way
// many concurrent sessions arrive.
func (g *Gen) Interleaved(sessions []string, n int) []event.Event {
	out := make([]event.Event, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, g.Event(sessions[i%len(sessions)]))
	}
	return out
}

// SessionIDs returns n session ids prefix000000, prefix000001, ...
func SessionIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%06d", prefix, i)
	}
	return out
}
