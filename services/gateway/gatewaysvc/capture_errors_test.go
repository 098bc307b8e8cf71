package gatewaysvc

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/gatewaytest"
	"github.com/recallhq/recall/services/gateway/wire"
)

const overloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`

// TestCapture529IsVerbatimAndNotCaptured: an upstream 529 reaches the
// client as sent and is no assistant turn; the client's resend of the same
// history is stored once.
func TestCapture529IsVerbatimAndNotCaptured(t *testing.T) {
	env := startRecall(t)
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 2, Reply: func(r *gatewaytest.Request) *gatewaytest.Reply {
		if r.N != 2 {
			return nil
		}
		return &gatewaytest.Reply{Status: 529, Header: http.Header{"Content-Type": {"application/json"}, "X-Upstream": {"busy"}}, Body: []byte(overloaded)}
	}}))
	defer up.Close()
	g, url, _ := env.attached(t, up.URL)
	a := &agent{t: t, url: url, session: "busy-1"}
	a.add("user", "run the tools")
	a.answer(a.send(), false)
	calls := 1
	body := `{"model":"m","max_tokens":64,"stream":true,"messages":[` + strings.Join(raws(a.msgs), ",") + `]}`
	resp := post(t, url+"/anthropic/v1/messages", map[string]string{"x-api-key": secretKey, "x-recall-session": "busy-1"}, body)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || string(got) != overloaded || resp.Header.Get("X-Upstream") != "busy" {
		t.Fatalf("the 529 was not passed verbatim: %d %v %s", resp.StatusCode, resp.Header, got)
	}
	for r := a.send(); r.StopReason == "tool_use"; r = a.send() { // the client resends
		a.answer(r, false)
		calls++
	}
	settled(t, g)
	recs := env.records(t, "busy-1")
	for _, m := range recs {
		if strings.Contains(wire.Text(m.Content), "Overloaded") {
			t.Fatalf("the 529 was stored: %+v", m)
		}
	}
	if len(recs) != 1+2*calls+1 {
		t.Fatalf("%d records, want %d", len(recs), 1+2*calls+1)
	}
}

// TestCaptureClientDisconnectMidStream: a client that goes away mid-stream
// gets nothing captured of that exchange, and the gateway serves its next
// request and captures it.
func TestCaptureClientDisconnectMidStream(t *testing.T) {
	env := startRecall(t)
	up := httptest.NewServer(gatewaytest.New(gatewaytest.Script{ToolCalls: 1, Final: strings.Repeat("long answer ", 200), ChunkBytes: 8, Delay: 2 * time.Millisecond}))
	defer up.Close()
	g, _, _ := env.attached(t, up.URL)
	served := make(chan struct{}, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { served <- struct{}{} }() // the proxy aborts a handler whose client went away (a panic)
		g.ServeHTTP(w, r)
	}))
	defer srv.Close()
	a := &agent{t: t, url: srv.URL, session: "gone-1"}
	a.add("user", "run the tool")
	a.answer(a.send(), false)
	<-served
	body := `{"model":"m","max_tokens":64,"stream":true,"messages":[` + strings.Join(raws(a.msgs), ",") + `]}`
	resp := post(t, srv.URL+"/anthropic/v1/messages", map[string]string{"x-recall-session": "gone-1"}, body)
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // the client goes away
	<-served
	settled(t, g)
	if n := g.capture.queued.Load(); n != 1 {
		t.Fatalf("%d exchanges queued for capture, want 1 (not the one cut short)", n)
	}
	a.add("user", "are you there?")
	a.send()
	settled(t, g)
	recs := env.records(t, "gone-1")
	if len(recs) != 5 || recs[3].Role != events.RoleUser || recs[4].Role != events.RoleAssistant {
		t.Fatalf("records %d, want prompt, call, result, question, answer", len(recs))
	}
}

// TestCaptureRefusedStoresNothing: a request refused for its Recall token
// is neither forwarded nor captured.
func TestCaptureRefusedStoresNothing(t *testing.T) {
	env := startRecall(t)
	up := gatewaytest.New(gatewaytest.Script{})
	srv := httptest.NewServer(up)
	defer srv.Close()
	g, url, _ := newGateway(t, srv.URL, func(c *Config) { c.Tenants = "acme:" + goodTokenHash })
	g.Attach(t.Context(), env.nc, env.js)
	resp := post(t, url+"/anthropic/v1/messages", map[string]string{"x-recall-session": "refused-1", HeaderRecallToken: "wrong"}, strings.ReplaceAll(helloBody, "%s", "true"))
	resp.Body.Close()
	if resp.StatusCode != 401 || len(up.Requests()) != 0 || g.capture.queued.Load() != 0 {
		t.Fatalf("refused: status %d, forwarded %d, queued %d", resp.StatusCode, len(up.Requests()), g.capture.queued.Load())
	}
}
