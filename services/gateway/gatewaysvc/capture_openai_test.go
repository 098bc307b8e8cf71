package gatewaysvc

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
	"github.com/recallhq/recall/services/gateway/wire"
)

// oaiPost posts body to the gateway's OpenAI path and reads the reply.
func oaiPost(t *testing.T, url, path string, body any, api string) *wire.Reply {
	t.Helper()
	b, _ := json.Marshal(body)
	resp := post(t, url+"/openai/v1/"+path, map[string]string{"Authorization": "Bearer " + secretKey}, string(b))
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", path, resp.StatusCode)
	}
	return readReply(t, resp, api)
}

// checkLoop checks a session's records: calls tool calls and their
// results once each, records in all.
func checkLoop(t *testing.T, env *recallEnv, session string, calls, records int) {
	t.Helper()
	recs := env.records(t, session)
	uses, results := countTools(recs, true)
	if len(uses) != calls {
		t.Fatalf("%s: %d calls stored, want %d", session, len(uses), calls)
	}
	for id, n := range uses {
		if n != 1 || results[id] != 1 {
			t.Errorf("%s: call %s stored %d times, its result %d times", session, id, n, results[id])
		}
	}
	if len(recs) != records {
		t.Fatalf("%s: %d records, want %d", session, len(recs), records)
	}
	last := recs[len(recs)-1]
	if last.Role != events.RoleAssistant || last.Usage == nil || last.Usage.InputTokens == 0 || last.MessageID == "" {
		t.Fatalf("%s: the last answer has no usage or response id: %+v", session, last)
	}
}

// TestCaptureChatCompletions: a Chat tool loop, streaming and not in
// turn, without any session key (the session is its opening): each call
// and result once.
func TestCaptureChatCompletions(t *testing.T) {
	env := startRecall(t)
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 5}))
	defer up.Close()
	g, url, logs := env.attached(t, up.URL)
	msgs := []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": "run the tools"}}
	for i := 0; ; i++ {
		r := oaiPost(t, url, "chat/completions", map[string]any{"model": "gpt-test", "stream": i%2 == 0, "messages": msgs}, wire.ReplyChat)
		msgs = append(msgs, r.Chat)
		if len(r.Chat.ToolCalls) == 0 {
			break
		}
		msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": r.Chat.ToolCalls[0].ID, "content": "out " + r.Chat.ToolCalls[0].ID})
	}
	settled(t, g)
	chat, _ := wire.DecodeChat([]byte(`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"run the tools"}]}`))
	checkLoop(t, env, ChatSession(nil, chat).ID, 5, 1+2*5+1)
	assertNoSecret(t, env, logs.String())
}

// TestCaptureResponses: a Responses tool loop that resends its items
// (prompt_cache_key names the session), and one that sends only the new
// input with previous_response_id (the chain names it).
func TestCaptureResponses(t *testing.T) {
	env := startRecall(t)
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 4}))
	defer up.Close()
	g, url, logs := env.attached(t, up.URL)
	input := []any{map[string]any{"role": "user", "content": "run the tools"}}
	for i := 0; ; i++ {
		r := oaiPost(t, url, "responses", map[string]any{"model": "gpt-test", "stream": i%2 == 1, "prompt_cache_key": "resp-full", "input": input}, wire.ReplyResponses)
		it := r.Items[0]
		input = append(input, json.RawMessage(it.Raw))
		if it.Type != "function_call" {
			break
		}
		input = append(input, map[string]any{"type": "function_call_output", "call_id": it.CallID, "output": "out " + it.CallID})
	}
	up2 := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 4})) // its own count of calls
	defer up2.Close()
	g2, url, _ := env.attached(t, up2.URL)
	first := map[string]any{"model": "gpt-test", "input": "run the tools, chained"}
	r := oaiPost(t, url, "responses", first, wire.ReplyResponses)
	var chain string
	for i := 0; r.Items[0].Type == "function_call"; i++ {
		// Linked before the client saw the answer, not when the capture
		// runs: the next request finds its session on its own path.
		s, ok := g2.capture.chains.get(r.ID)
		if !ok || (chain != "" && s != chain) {
			t.Fatalf("response %s: session %q (linked %v), want %q", r.ID, s, ok, chain)
		}
		chain = s
		next := []any{map[string]any{"type": "function_call_output", "call_id": r.Items[0].CallID, "output": "out"}}
		r = oaiPost(t, url, "responses", map[string]any{"model": "gpt-test", "stream": i%2 == 0, "previous_response_id": r.ID, "input": next}, wire.ReplyResponses)
	}
	settled(t, g)
	settled(t, g2)
	checkLoop(t, env, "resp-full", 4, 1+2*4+1)
	fr, _ := wire.DecodeResponses([]byte(`{"model":"gpt-test","input":"run the tools, chained"}`))
	checkLoop(t, env, ResponsesSession(nil, fr, &sessionChains{}).ID, 4, 1+2*4+1)
	assertNoSecret(t, env, logs.String())
}
