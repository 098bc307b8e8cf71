package gatewaysvc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/recallhq/recall/services/gateway/wire"
)

// ledgerInput is a Responses input of n function calls with ~40 KB outputs.
func ledgerInput(tag string, n int) []map[string]any {
	in := []map[string]any{{"role": "user", "content": fmt.Sprintf("Audit the %s ledgers.", tag)}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("call_%s_%d", tag, i)
		in = append(in, map[string]any{"type": "function_call", "call_id": id, "name": "Bash", "arguments": fmt.Sprintf(`{"command":"cat ledger%d.txt"}`, i)},
			map[string]any{"type": "function_call_output", "call_id": id, "output": fmt.Sprintf("ledger %d (%s): ", i, tag) + strings.Repeat(fmt.Sprintf("entry %d balanced; ", i), 2200)})
	}
	return append(in, map[string]any{"role": "user", "content": "Go on with the audit."})
}

// storedItems stores a Responses input as capture would, notes covering
// the items up to summarized.
func (e *compactEnv) storedItems(session string, input []map[string]any, summarized int) {
	e.t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "m", "input": input})
	r, err := wire.DecodeResponses(b)
	if err != nil {
		e.t.Fatal(err)
	}
	e.stored(session, wire.ItemMessages(r.Items), summarized)
}

func (e *compactEnv) sendOpenAI(path, session string, req map[string]any) (int, map[string]any) {
	e.t.Helper()
	b, _ := json.Marshal(req)
	resp := post(e.t, e.url+"/openai/v1"+path, map[string]string{HeaderRecallSession: session}, string(b))
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	return resp.StatusCode, out
}

// checkItemsSent fails unless no upstream request after n holds a
// compaction item or one of gone.
func (e *compactEnv) checkItemsSent(n int, what string, gone ...string) {
	e.t.Helper()
	for _, q := range e.sentSince(n) {
		var body struct {
			Input json.RawMessage `json:"input"`
		}
		_ = json.Unmarshal(q.Body, &body)
		if bytes.Contains(body.Input, []byte(`"type":"compaction"`)) || bytes.Contains(q.Body, []byte(wire.MarkerPrefix)) {
			e.t.Errorf("%s: upstream request #%d holds a compaction item", what, q.N)
		}
		for _, s := range gone {
			if bytes.Contains(q.Body, []byte(s)) {
				e.t.Errorf("%s: upstream request #%d still holds %s", what, q.N, s)
			}
		}
	}
}

// TestResponsesCompactFromMemory: POST /v1/responses/compact is answered
// with one Recall compaction item and no upstream call; the next request,
// the output plus a new turn, reaches the upstream as plain input (the
// summary as a user message, the kept calls rendered in it).
func TestResponsesCompactFromMemory(t *testing.T) {
	e := startCompactEnv(t)
	input := ledgerInput("compact", 6)
	e.storedItems("oc", input, 8)
	n := len(e.up.Requests())
	status, out := e.sendOpenAI("/responses/compact", "oc", map[string]any{"model": "gpt", "input": input})
	output, _ := out["output"].([]any)
	if status != 200 || out["object"] != "response.compaction" || len(output) != 1 || len(e.sentSince(n)) != 0 {
		t.Fatalf("status %d, answer %v, upstream requests %d", status, out, len(e.sentSince(n)))
	}
	item := output[0].(map[string]any)
	if item["type"] != wire.TypeCompaction || !wire.IsMarker(item["encrypted_content"].(string)) {
		t.Fatalf("item %v", item)
	}
	e.sendOpenAI("/responses", "oc", map[string]any{"model": "gpt", "input": []any{item, map[string]string{"role": "user", "content": "Continue."}}})
	e.checkItemsSent(n, "after compact", `"call_compact_1"`)
	if sent := e.sentSince(n); len(sent) != 1 || !bytes.Contains(sent[0].Body, []byte("RECALL-NOTES-MARK")) || !bytes.Contains(sent[0].Body, []byte("ledger 6 (compact)")) {
		t.Fatalf("after compact: %d upstream requests", len(sent))
	}
}

// TestResponsesContextManagementCompaction: a context_management compaction
// over its threshold sends the upstream summary + kept items and puts a
// compaction item first in the output; appending the output as the SDK
// does, the next request drops what came before it and keeps the kept
// calls verbatim.
func TestResponsesContextManagementCompaction(t *testing.T) {
	e := startCompactEnv(t)
	input := ledgerInput("cm", 6)
	e.storedItems("ocm", input, 8)
	cm := []any{map[string]any{"type": "compaction", "compact_threshold": 50000}}
	n := len(e.up.Requests())
	status, out := e.sendOpenAI("/responses", "ocm", map[string]any{"model": "gpt", "input": input, "context_management": cm})
	output, _ := out["output"].([]any)
	if status != 200 || len(output) < 2 || output[0].(map[string]any)["type"] != wire.TypeCompaction {
		t.Fatalf("status %d, output %v", status, output)
	}
	e.checkItemsSent(n, "during", `"call_cm_1"`)
	if sent := e.sentSince(n); len(sent) != 1 || !bytes.Contains(sent[0].Body, []byte(`"call_cm_6"`)) {
		t.Fatalf("during: %d upstream requests", len(sent))
	}
	next := append(append(append([]any{}, anySlice(input)...), output...), map[string]string{"role": "user", "content": "Continue."})
	n = len(e.up.Requests())
	e.sendOpenAI("/responses", "ocm", map[string]any{"model": "gpt", "input": next, "context_management": cm})
	e.checkItemsSent(n, "after", `"call_cm_1"`)
	if sent := e.sentSince(n); len(sent) != 1 || !bytes.Contains(sent[0].Body, []byte(`"call_cm_6"`)) || !bytes.Contains(sent[0].Body, []byte("RECALL-NOTES-MARK")) {
		t.Fatalf("after: %d upstream requests", len(sent))
	}
}

// TestCodexCompactionAnsweredFromMemory: Codex's compact prompt as the last
// user item is answered from memory with the summary as the message.
func TestCodexCompactionAnsweredFromMemory(t *testing.T) {
	e := startCompactEnv(t)
	input := ledgerInput("codex", 6)
	e.storedItems("ocx", input, 8)
	input[len(input)-1] = map[string]any{"role": "user", "content": "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will resume the task."}
	n := len(e.up.Requests())
	status, out := e.sendOpenAI("/responses", "ocx", map[string]any{"model": "gpt", "input": input})
	b, _ := json.Marshal(out)
	if status != 200 || len(e.sentSince(n)) != 0 || !bytes.Contains(b, []byte("RECALL-NOTES-MARK")) || out["object"] != "response" {
		t.Fatalf("status %d, %d upstream requests, answer %.400s", status, len(e.sentSince(n)), b)
	}
}

func anySlice(ms []map[string]any) []any {
	out := make([]any, len(ms))
	for i := range ms {
		out[i] = ms[i]
	}
	return out
}
