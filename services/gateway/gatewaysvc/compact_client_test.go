package gatewaysvc

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

func readFixture(t *testing.T, name string) fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/claudecode/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestClaudeCodeCompactionAnsweredFromMemory: the real Claude Code's
// summarization turn (recorded from 2.1.332) is recognized by the default
// rule and answered from memory as the stream it expects, <summary> tags
// around Recall's summary and the kept messages; the upstream never sees
// it. With client compaction turned off it goes to the upstream.
func TestClaudeCodeCompactionAnsweredFromMemory(t *testing.T) {
	e := startCompactEnv(t)
	f := readFixture(t, "014-compaction.json")
	req, err := wire.DecodeMessages(f.Body)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := IsClientCompaction(events.GatewayConfig{}, wire.LastUserText(req.Messages)); !ok {
		t.Fatal("the default rules do not recognize Claude Code's summarization turn")
	}
	session := f.Headers["x-claude-code-session-id"]
	e.stored(session, req.Messages, 6)
	ask := func() (int, string) {
		h := map[string]string{"X-Claude-Code-Session-Id": session, "anthropic-version": "2023-06-01"}
		resp := post(t, e.url+"/anthropic/v1/messages?beta=true", h, string(f.Body))
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	n := len(e.up.Requests())
	status, body := ask()
	blocks, stop := answerContent(t, []byte(body))
	if status != 200 || stop != "end_turn" || len(blocks) != 1 || len(e.sentSince(n)) != 0 {
		t.Fatalf("status %d stop %q, %d upstream requests: %.600s", status, stop, len(e.sentSince(n)), body)
	}
	text := blocks[0]["text"].(string)
	if !strings.HasPrefix(text, "<summary>") || !strings.HasSuffix(text, "</summary>") || !strings.Contains(text, "RECALL-NOTES-MARK") ||
		!strings.Contains(text, strings.TrimSpace(RecentHeading)) {
		t.Fatalf("the answer is not Recall's summary in <summary> tags: %.800s", text)
	}
	off := false
	e.setConfig(&events.GatewayConfig{CompactAboveTokens: 0, ClientCompaction: &events.ClientCompaction{Enabled: &off}})
	testPollOff(t, e)
	if status, _ := ask(); status != 200 || len(e.sentSince(n)) != 1 || !e.sentSince(n)[0].Summarization {
		t.Fatalf("client compaction off: status %d, upstream requests %d", status, len(e.sentSince(n)))
	}
}

// testPollOff waits until the gateway sees client compaction turned off.
func testPollOff(t *testing.T, e *compactEnv) {
	t.Helper()
	for range 500 {
		if c := e.g.gatewayConfig(ingestDefaultTenant).ClientCompaction; c != nil && c.Enabled != nil && !*c.Enabled {
			return
		}
		e.nc.Flush()
	}
	t.Fatal("the gateway did not see the config")
}

// TestTransparentCompaction: with gateway.compact_above_tokens a request
// over it reaches the upstream as summary + kept window (valid, without
// the first calls), and the client gets the upstream's answer as is; a
// request under it, and any with the setting at 0, goes unchanged.
func TestTransparentCompaction(t *testing.T) {
	e := startCompactEnv(t)
	msgs := ledgerHistory("tr", 6)
	e.stored("tr", wireMsgs(t, msgs), 8)
	req := map[string]any{"model": "m", "max_tokens": 64, "messages": msgs}
	raw, _ := json.Marshal(req)
	n := len(e.up.Requests())
	e.send("tr", req)
	if sent := e.sentSince(n); len(sent) != 1 || !bytes.Equal(sent[0].Body, raw) {
		t.Fatal("with compact_above_tokens off the request did not go unchanged")
	}
	e.setConfig(&events.GatewayConfig{CompactAboveTokens: 50000})
	n = len(e.up.Requests())
	status, _, body := e.send("tr", req)
	sent := e.checkSent(n, "transparent", `"toolu_tr_1"`)
	if status != 200 || len(sent) != 1 || !bytes.Contains(sent[0].Body, []byte("RECALL-NOTES-MARK")) || !bytes.Contains(sent[0].Body, []byte(`"toolu_tr_6"`)) {
		t.Fatalf("status %d %s; %d upstream requests\n%s", status, body, len(sent), e.logs)
	}
	if blocks, _ := answerContent(t, body); len(blocks) == 0 || blocks[0]["type"] == wire.TypeCompaction {
		t.Fatalf("the client did not get the upstream's answer as is: %s", body)
	}
	if e.g.Stats().Transparent.Load() != 1 && !t.Failed() {
		t.Fatalf("Transparent = %d", e.g.Stats().Transparent.Load())
	}
	small := map[string]any{"model": "m", "max_tokens": 64, "messages": ledgerHistory("tr", 1)}
	raw, _ = json.Marshal(small)
	n = len(e.up.Requests())
	e.send("tr", small)
	if sent := e.sentSince(n); len(sent) != 1 || !bytes.Equal(sent[0].Body, raw) {
		t.Fatal("a request under compact_above_tokens did not go unchanged")
	}
}

// TestPreCheckSkipsOrdinaryRequests: Claude Code's ordinary requests are
// not decoded by the compaction code (their clear_thinking keeps all), its
// summarization turn and a compaction request are.
func TestPreCheckSkipsOrdinaryRequests(t *testing.T) {
	g, _, _ := newGateway(t, "http://127.0.0.1:1", nil)
	for name, want := range map[string]bool{"001-main.json": false, "016-main.json": false, "014-compaction.json": true} {
		x := &exchange{g: g, p: g.anthropic, path: "/v1/messages", body: readFixture(t, name).Body}
		if got := x.mayCompact(events.GatewayConfig{}); got != want {
			t.Errorf("%s: mayCompact %v, want %v", name, got, want)
		}
	}
	x := &exchange{g: g, p: g.anthropic, path: "/v1/messages", body: []byte(`{"compaction":{"type":"summarize"}}`)}
	if !x.mayCompact(events.GatewayConfig{}) {
		t.Error("the on-demand compaction field was skipped")
	}
}
