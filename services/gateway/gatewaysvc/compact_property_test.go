package gatewaysvc

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
	"github.com/recallhq/recall/services/gateway/wire"
)

// randomTranscript is a Claude Code–like request history: user requests,
// assistant turns with text and one or several tool calls (answered in
// completion order), results, system turns anywhere, and — when hostile —
// the damage clients and stores do: orphaned results, unanswered calls,
// blank texts, results after text.
func randomTranscript(r *rand.Rand, hostile bool) []wire.Msg {
	var msgs []wire.Msg
	add := func(role string, c ...events.Block) {
		msgs = append(msgs, wire.Msg{Message: events.Message{Role: role, Content: c}})
	}
	text := func(s string) events.Block { return events.Block{Type: events.BlockText, Text: s} }
	add(events.RoleUser, text("start the task"))
	call := 0
	for range 2 + r.IntN(30) {
		if r.IntN(6) == 0 {
			add(wire.RoleSystem, text("a system note"))
		}
		switch r.IntN(4) {
		case 0:
			add(events.RoleAssistant, text("an answer"))
			add(events.RoleUser, text(fmt.Sprintf("request %d", r.IntN(100))))
		default:
			var uses, results []events.Block
			for range 1 + r.IntN(3) {
				call++
				id := fmt.Sprintf("toolu_%d", call)
				uses = append(uses, events.Block{Type: events.BlockToolUse, ID: id, Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)})
				results = append([]events.Block{{Type: events.BlockToolResult, ToolUseID: id, Content: events.Content{text("out")}}}, results...)
			}
			if r.IntN(3) == 0 {
				uses = append([]events.Block{text("let me look")}, uses...)
			}
			add(events.RoleAssistant, uses...)
			if hostile && r.IntN(5) == 0 {
				results = results[1:] // a call never answered
				if len(results) == 0 {
					results = []events.Block{text("interrupted")}
				}
			}
			if hostile && r.IntN(7) == 0 {
				results = append([]events.Block{text(" ")}, results...) // blank text first
			}
			add(events.RoleUser, results...)
		}
	}
	if hostile && r.IntN(4) == 0 {
		add(events.RoleUser, events.Block{Type: events.BlockToolResult, ToolUseID: "toolu_never", Content: events.Content{text("x")}})
	}
	return msgs
}

// TestSplicedContextsAreValid: over random transcripts and kept-window
// starts, the context the gateway sends upstream after compacting — the
// summary, then the kept messages — is valid by the served-context
// validator; from valid transcripts it is always produced and keeps every
// message from the kept start on, tool calls with their results; from
// hostile ones it is valid or refused (then the request goes unchanged).
func TestSplicedContextsAreValid(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 3))
	for i := range 1500 {
		hostile := i%2 == 1
		msgs := randomTranscript(r, hostile)
		from := r.IntN(len(msgs))
		out, err := spliced(msgs, fmt.Sprintf("summary %d", i), from)
		if err != nil {
			if !hostile {
				t.Fatalf("case %d: a valid transcript from %d gave no context: %v", i, from, err)
			}
			continue
		}
		if err := memory.ValidateContext(wire.Conversation(out)); err != nil {
			t.Fatalf("case %d (hostile %v): the spliced context is invalid: %v", i, hostile, err)
		}
		if err := gatewaytest.Alternation(out); err != nil {
			t.Fatalf("case %d (hostile %v): the spliced context: %v", i, hostile, err)
		}
		first := firstTurn(out)
		if first.Role != events.RoleUser || first.Content[0].Text != SummaryPreamble+fmt.Sprintf("summary %d", i) {
			t.Fatalf("case %d: the context does not start with the summary", i)
		}
		if !hostile {
			k := keepFrom(msgs, from)
			// The summary and the kept messages, each run of one role joined.
			if want := alternate(append([]wire.Msg{summaryMsg(fmt.Sprintf("summary %d", i))}, msgs[k:]...)); len(out) != len(want) {
				t.Fatalf("case %d: %d messages sent, want the summary and the %d from %d (%d once joined)", i, len(out), len(msgs)-k, k, len(want))
			}
			if n, want := blocks(out), blocks(msgs[k:])+1; n != want {
				t.Fatalf("case %d: %d blocks sent, want the summary and the %d kept", i, n, want-1)
			}
		}
	}
}

// TestResolvedBlocksAreValid: a Recall compaction block placed anywhere
// in a random history (trusted or not, its kept window present or not)
// always becomes plain valid content without a compaction block.
func TestResolvedBlocksAreValid(t *testing.T) {
	g, _, _ := newGateway(t, "http://127.0.0.1:1", nil)
	r := rand.New(rand.NewPCG(41, 7))
	for i := range 300 {
		msgs := randomTranscript(r, i%3 == 0)
		end := 1 + r.IntN(len(msgs))
		for end < len(msgs) && msgs[end-1].Role != events.RoleUser {
			end++
		}
		hist := msgs[:end]
		kept := r.IntN(len(hist) + 1)
		m := wire.Marker{Tenant: ingestDefaultTenant, Session: "s", Kept: kept, SummaryLen: 7}
		if kept > 0 {
			m.Head = fingerprint(&hist[len(hist)-kept].Message)
		}
		key := g.compact.key
		if i%5 == 0 {
			key = []byte("forged")
		}
		block := wire.NewCompactionBlock("summary rendered", wire.Seal(key, m))
		after := []any{block}
		if r.IntN(2) == 0 {
			after = append(after, map[string]string{"type": "text", "text": "and on"})
		}
		all := append(rawMsgs(t, hist), map[string]any{"role": "assistant", "content": after}, map[string]any{"role": "user", "content": "Continue."})
		body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 8, "messages": all})
		req, err := wire.DecodeMessages(body)
		if err != nil {
			t.Fatal(err)
		}
		x := &exchange{g: g, tenant: ingestDefaultTenant}
		if !x.resolveBlocks(req, "s") {
			t.Fatalf("case %d: the Recall block was not resolved", i)
		}
		if err := memory.ValidateContext(wire.Conversation(req.Messages)); err != nil {
			t.Fatalf("case %d: the resolved context is invalid: %v", i, err)
		}
		if err := gatewaytest.Alternation(req.Messages); err != nil {
			roles := []string{}
			for _, m := range req.Messages {
				roles = append(roles, m.Role+":"+wire.Text(m.Content)[:min(20, len(wire.Text(m.Content)))])
			}
			t.Fatalf("case %d: the resolved context: %v %q kept %d", i, err, roles, kept)
		}
		if _, ok := wire.LastCompaction(req.Messages); ok {
			t.Fatalf("case %d: a compaction block is left", i)
		}
	}
}

func rawMsgs(t *testing.T, msgs []wire.Msg) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		b, _ := json.Marshal(m)
		_ = json.Unmarshal(b, &out[i])
	}
	return out
}

// firstTurn is the first message of msgs that is not a system turn.
func firstTurn(msgs []wire.Msg) wire.Msg {
	for _, m := range msgs {
		if m.Role != wire.RoleSystem {
			return m
		}
	}
	return wire.Msg{}
}

func blocks(msgs []wire.Msg) (n int) {
	for _, m := range msgs {
		if m.Role != wire.RoleSystem {
			n += len(m.Content)
		}
	}
	return n
}

// TestAlternateJoinsRuns: a summary before a kept user turn, and two user
// turns left by a dropped compaction-only assistant message, are sent as
// one user turn each, the client's own fields and blocks unchanged and in
// order, a system turn after the joined message.
func TestAlternateJoinsRuns(t *testing.T) {
	body := `{"model":"m","max_tokens":8,"messages":[
		{"role":"user","content":[{"type":"text","text":"fix the build","cache_control":{"type":"ephemeral"}}]},
		{"role":"system","content":"a system note"},
		{"role":"user","content":"and the tests"},
		{"role":"assistant","content":"done"}]}`
	req, err := wire.DecodeMessages([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	out := alternate(append([]wire.Msg{summaryMsg("the summary")}, req.Messages...))
	got, _ := json.Marshal(out)
	want := `[{"role":"user","content":[{"type":"text","text":` + mustJSON(t, SummaryPreamble+"the summary") + `},` +
		`{"type":"text","text":"fix the build","cache_control":{"type":"ephemeral"}},{"type":"text","text":"and the tests"}]},` +
		`{"role":"system","content":"a system note"},{"role":"assistant","content":"done"}]`
	var g, w any
	_ = json.Unmarshal(got, &g)
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("joined:\n got %s\nwant %s", got, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
