package gatewaysvc

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/testpoll"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
	"github.com/recallhq/recall/services/gateway/wire"
)

// quick shortens the gateway's capture retries so a test of an outage
// does not wait for the production bounds.
func quick(g *Gateway) {
	g.capture.retryFor, g.capture.timeout = 300*time.Millisecond, 2*time.Second
}

// TestCaptureNATSDownMidStream: NATS goes away while a stream is being
// forwarded. The client gets the whole stream; the capture fails and is
// counted; once NATS is back the session's next request stores everything,
// each record once.
func TestCaptureNATSDownMidStream(t *testing.T) {
	env := startRecall(t)
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 3, ChunkBytes: 4, Delay: 5 * time.Millisecond}))
	defer up.Close()
	g, url, logs := env.attached(t, up.URL)
	quick(g)
	a := &agent{t: t, url: url, session: "down-1"}
	a.add("user", "run the tools")
	a.answer(a.send(), false)
	settled(t, g)

	body := `{"model":"m","max_tokens":64,"stream":true,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[` + strings.Join(raws(a.msgs), ",") + `]}`
	resp := post(t, url+"/anthropic/v1/messages", map[string]string{"x-api-key": secretKey, "x-recall-session": "down-1"}, body)
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n') // the stream has begun
	if err != nil {
		t.Fatal(err)
	}
	env.srv.Stop()
	rest, err := io.ReadAll(br)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("the stream was cut while NATS went down (%v): %.200s", err, rest)
	}
	testpoll.Until(t, 20*time.Second, "the capture failed and was counted", func() bool {
		return g.stats.CaptureFailed.Load() >= 1 && g.stats.FailOpen.Load() >= 1
	})
	if !strings.Contains(logs.String(), "gateway fails open") {
		t.Fatal("the failure was not logged")
	}
	env.srv.Restart(t)
	testpoll.Until(t, 20*time.Second, "the gateway reconnected", func() bool { return env.nc.IsConnected() })

	// The client goes on: its history holds the answer that was not stored.
	asm := wire.NewAssembler(wire.ReplyAnthropic, true, 1<<20)
	_, _ = asm.Write([]byte(first))
	_, _ = asm.Write(rest)
	r, err := asm.Reply()
	if err != nil {
		t.Fatal(err)
	}
	a.add("assistant", r.Anthropic.Content)
	a.answer(r, false)
	for r := a.send(); r.StopReason == "tool_use"; r = a.send() {
		a.answer(r, false)
	}
	settled(t, g)
	recs := env.records(t, "down-1")
	uses, results := countTools(recs, true)
	if len(uses) != 3 {
		t.Fatalf("%d calls stored, want 3", len(uses))
	}
	for id, n := range uses {
		if n != 1 || results[id] != 1 {
			t.Errorf("call %s stored %d times, its result %d times", id, n, results[id])
		}
	}
	if len(recs) != 1+2*3+1 {
		t.Fatalf("%d records, want %d", len(recs), 1+2*3+1)
	}
}

func raws(msgs []json.RawMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m)
	}
	return out
}
