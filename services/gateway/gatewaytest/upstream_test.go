package gatewaytest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/recallhq/recall/services/gateway/gatewaytest"
)

func TestToolLoopThenFinalAndSummaryTurns(t *testing.T) {
	up := gatewaytest.New(gatewaytest.Script{ToolCalls: 2})
	srv := httptest.NewServer(up)
	defer srv.Close()
	ask := func(body string) map[string]any {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("X-Claude-Code-Session-Id", "s1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	const prompt = `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"%s"}]}`
	for i, want := range []string{"tool_use", "tool_use", "end_turn"} {
		if got := ask(strings.ReplaceAll(prompt, "%s", "go")); got["stop_reason"] != want {
			t.Fatalf("answer %d: stop_reason %v, want %s", i, got["stop_reason"], want)
		}
	}
	got := ask(strings.ReplaceAll(prompt, "%s", "Please write a detailed summary of the conversation so far."))
	if c := got["content"].([]any)[0].(map[string]any); !strings.Contains(c["text"].(string), "<summary>") {
		t.Fatalf("summary turn answered %v", got)
	}
	reqs := up.Requests()
	if len(reqs) != 4 || !reqs[3].Summarization || reqs[0].Summarization || reqs[0].Conversation != "s1" || reqs[0].Invalid != "" {
		t.Fatalf("recorded %+v", reqs)
	}
	bad := `{"model":"m","max_tokens":9,"messages":[{"role":"assistant","content":"x"}]}`
	ask(bad)
	if r := up.Requests()[4]; r.Invalid == "" {
		t.Fatal("a context starting with an assistant turn was not marked invalid")
	}
}

func TestStreamsOfEveryAPI(t *testing.T) {
	srv := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 1}))
	defer srv.Close()
	for path, body := range map[string]string{
		"/v1/messages":         `{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"go"}]}`,
		"/v1/chat/completions": `{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`,
		"/v1/responses":        `{"model":"m","stream":true,"input":"go"}`,
	} {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(string(b), "data: ") {
			t.Fatalf("%s: %s %s", path, resp.Header.Get("Content-Type"), b)
		}
	}
}

func TestClaudeCodeSystemTurnsAreAccepted(t *testing.T) {
	up := gatewaytest.New(gatewaytest.Script{})
	srv := httptest.NewServer(up)
	defer srv.Close()
	body := `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":"ok"},` +
		`{"role":"user","content":[{"type":"text","text":"Write a detailed summary of the conversation."}]},{"role":"system","content":"Today's date is x"}]}`
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if r := up.Requests()[0]; resp.StatusCode != 200 || r.Invalid != "" || !r.Summarization {
		t.Fatalf("status %d, recorded %+v", resp.StatusCode, r)
	}
}
