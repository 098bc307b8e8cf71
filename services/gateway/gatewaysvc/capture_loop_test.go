package gatewaysvc

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
	"github.com/recallhq/recall/services/gateway/wire"
)

// agent is a scripted Anthropic client: it resends its whole history with
// every request, as Claude Code does, and restructures it the ways
// clients do.
type agent struct {
	t       *testing.T
	url     string
	session string
	msgs    []json.RawMessage
	preview map[int]string // message index → a result's preview, sent from the next request on
}

func (a *agent) add(role string, content any) {
	b, _ := json.Marshal(map[string]any{"role": role, "content": content})
	a.msgs = append(a.msgs, b)
}

// send sends the history and appends the answer; it returns the reply.
func (a *agent) send() *wire.Reply {
	a.t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "claude-test", "max_tokens": 1024, "stream": true,
		"tools": []map[string]any{{"name": "Bash", "input_schema": map[string]string{"type": "object"}}}, "messages": a.msgs})
	resp := post(a.t, a.url+"/anthropic/v1/messages", map[string]string{"x-api-key": secretKey, "x-recall-session": a.session}, string(body))
	if resp.StatusCode != 200 {
		a.t.Fatalf("status %d", resp.StatusCode)
	}
	r := readReply(a.t, resp, wire.ReplyAnthropic)
	a.add("assistant", r.Anthropic.Content)
	for i, p := range a.preview { // restructure: the large output becomes its preview
		var m map[string]any
		_ = json.Unmarshal(a.msgs[i], &m)
		m["content"] = []map[string]any{{"type": "tool_result", "tool_use_id": p[:strings.IndexByte(p, ' ')], "content": p}}
		a.msgs[i], _ = json.Marshal(m)
		delete(a.preview, i)
	}
	return r
}

// answer appends the results of the reply's tool calls (merged into one
// user message, in reverse order as Claude Code's completion order may be).
func (a *agent) answer(r *wire.Reply, big bool) {
	var results []map[string]any
	for _, b := range r.Anthropic.Content {
		if b.Type == events.BlockToolUse {
			out := "output of " + b.ID
			if big {
				out = strings.Repeat("x", 30<<10)
				a.preview = map[int]string{len(a.msgs): b.ID + " <persisted-output> Output too large (30KB). Preview (first 2KB): xxxx"}
			}
			results = append([]map[string]any{{"type": "tool_result", "tool_use_id": b.ID, "content": out}}, results...)
		}
	}
	a.add("user", results)
}

// parallelAt answers request n of the upstream with two tool calls in one
// message.
func parallelAt(n int) func(r *gatewaytest.Request) *gatewaytest.Reply {
	return func(r *gatewaytest.Request) *gatewaytest.Reply {
		if r.N != n {
			return nil
		}
		rec := httptest.NewRecorder()
		writeSSE(rec, wire.Response{ID: "msg_parallel", Model: "claude-test", StopReason: "tool_use", Usage: events.Usage{InputTokens: 100, OutputTokens: 9},
			Content: events.Content{
				{Type: events.BlockText, Text: "two at once"},
				{Type: events.BlockToolUse, ID: "toolu_par_a", Name: "Bash", Input: json.RawMessage(`{"command":"a"}`)},
				{Type: events.BlockToolUse, ID: "toolu_par_b", Name: "Bash", Input: json.RawMessage(`{"command":"b"}`)}}})
		return &gatewaytest.Reply{Status: 200, Header: rec.Header(), Body: rec.Body.Bytes()}
	}
}

// TestCaptureLongLoop: 120 tool calls in one session — parallel calls
// merged in one message, a 30 KB output replaced by its preview on the
// next request, a gateway restart half-way, "continue" sent twice at the
// end — each call and each result stored once, both "continue"s stored.
func TestCaptureLongLoop(t *testing.T) {
	env := startRecall(t)
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 120, Reply: parallelAt(10)}))
	defer up.Close()
	g, url, _ := env.attached(t, up.URL)
	a := &agent{t: t, url: url, session: "loop-1"}
	a.add("user", "run the tools")
	turns := 0
	for i := 0; ; i++ {
		if i == 60 { // a restart: a new gateway, nothing in memory
			settled(t, g)
			g, url, _ = env.attached(t, up.URL)
			a.url = url
		}
		r := a.send()
		if r.StopReason != "tool_use" {
			break
		}
		a.answer(r, i == 20)
		turns++
	}
	for range 2 {
		a.add("user", "continue")
		a.send()
	}
	settled(t, g)
	recs := env.records(t, "loop-1")
	uses, results := countTools(recs, true)
	if turns < 100 || len(uses) != turns+1 {
		t.Fatalf("%d tool calls stored, want %d (one message held two)", len(uses), turns+1)
	}
	for id, n := range uses {
		if n != 1 || results[id] != 1 {
			t.Errorf("call %s stored %d times, its result %d times", id, n, results[id])
		}
	}
	continues, finals, big := 0, 0, 0
	for _, m := range recs {
		switch text := wire.Text(m.Content); {
		case m.Role == events.RoleUser && text == "continue":
			continues++
		case m.Role == events.RoleAssistant && text == "Done.":
			finals++
		}
		for _, b := range m.Content {
			if b.Type == events.BlockToolResult && len(wire.Text(b.Content)) == 30<<10 {
				big++
			}
		}
	}
	if continues != 2 || finals != 3 || big != 1 {
		t.Fatalf("stored %d \"continue\" (want 2), %d answers \"Done.\" (want 3), %d full 30 KB outputs (want 1)", continues, finals, big)
	}
	if want := 1 + 2*turns + 1 + 4; len(recs) != want {
		t.Fatalf("%d records, want %d", len(recs), want)
	}
}

// TestCapture20MBBody: a 20 MB tool output is forwarded, stored once
// (shortened to the event limit, with a note) and not again when the next
// request resends it. Under the race detector, 2 MB against a 1 MB limit.
func TestCapture20MBBody(t *testing.T) {
	env := startRecall(t)
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 2}))
	defer up.Close()
	g, url, _ := env.attached(t, up.URL)
	size := 20 << 20
	if raceEnabled {
		size, g.capture.recordLimit = 2<<20, 1<<20
	}
	a := &agent{t: t, url: url, session: "big-1"}
	a.add("user", "read the big file")
	r := a.send()
	a.add("user", []map[string]any{{"type": "tool_result", "tool_use_id": r.Anthropic.Content[0].ID, "content": strings.Repeat("y", size)}})
	for r = a.send(); r.StopReason == "tool_use"; r = a.send() {
		a.answer(r, false)
	}
	a.add("user", "thanks")
	a.send()
	settled(t, g)
	if g.stats.CaptureFailed.Load() != 0 {
		t.Fatalf("%d captures failed", g.stats.CaptureFailed.Load())
	}
	recs := env.records(t, "big-1")
	_, results := countTools(recs, true)
	if len(results) != 2 || len(recs) != 1+2*2+1+2 {
		t.Fatalf("%d results, %d records", len(results), len(recs))
	}
	text := wire.Text(recs[2].Content[0].Content)
	if len(text) >= size || len(text) < g.capture.recordLimit/4 || !strings.Contains(text, "cut by the Recall gateway") {
		t.Fatalf("the 20 MB output was stored as %d bytes", len(text))
	}
}
