package gatewaysvc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/recallhq/recall/services/gateway/gatewaytest"
)

// syncBuffer is a log sink tests read while the gateway writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newGateway serves a gateway in front of upstream (both providers) and
// returns its URL and its log.
func newGateway(t *testing.T, upstream string, mod func(*Config)) (*Gateway, string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{AnthropicURL: upstream, OpenAIURL: upstream}
	if mod != nil {
		mod(&cfg)
	}
	g, err := New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv.URL, logs
}

func post(t *testing.T, url string, header map[string]string, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const helloBody = `{"model":"claude-test","max_tokens":64,"stream":%s,"messages":[{"role":"user","content":"hello"}]}`

func TestStreamIsForwardedAsItArrives(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\"}\n\n")
		w.(http.Flusher).Flush()
		<-release // the rest only once the client saw the first event
		io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	_, gw, _ := newGateway(t, up.URL, nil)
	resp := post(t, gw+"/anthropic/v1/messages", nil, strings.ReplaceAll(helloBody, "%s", "true"))
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q, %v: the first event did not arrive before the upstream finished", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("the rest of the stream is missing: %q", rest)
	}
}

func TestUpstreamErrorsReachTheClientVerbatim(t *testing.T) {
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/anthropic/v1/messages", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`},
		{"/anthropic/v1/messages", 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{"/anthropic/v1/messages", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
		{"/anthropic/v1/messages", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{"/openai/v1/chat/completions", 429, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`},
		{"/anthropic/v1/models", 404, `{"type":"error","error":{"type":"not_found_error","message":"nope"}}`},
	} {
		t.Run(tc.path+"/"+http.StatusText(tc.status), func(t *testing.T) {
			up := gatewaytest.New(gatewaytest.Script{Reply: func(*gatewaytest.Request) *gatewaytest.Reply {
				return &gatewaytest.Reply{Status: tc.status, Body: []byte(tc.body),
					Header: http.Header{"Retry-After": {"7"}, "Request-Id": {"req_123"}, "X-Should-Retry": {"true"}}}
			}})
			srv := httptest.NewServer(up)
			defer srv.Close()
			_, gw, _ := newGateway(t, srv.URL, nil)
			resp := post(t, gw+tc.path, nil, strings.ReplaceAll(helloBody, "%s", "false"))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || string(body) != tc.body {
				t.Fatalf("got %d %s, want %d %s", resp.StatusCode, body, tc.status, tc.body)
			}
			for k, v := range map[string]string{"Retry-After": "7", "Request-Id": "req_123", "X-Should-Retry": "true"} {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestProviderKeyPassesUntouchedAndIsNeverLogged(t *testing.T) {
	const key = "sk-ant-planted-KEY-4f1c9a"
	up := gatewaytest.New(gatewaytest.Script{})
	srv := httptest.NewServer(up)
	defer srv.Close()
	_, gw, logs := newGateway(t, srv.URL, nil)
	for _, stream := range []string{"true", "false"} {
		resp := post(t, gw+"/anthropic/v1/messages", map[string]string{"x-api-key": key, "Authorization": "Bearer " + key,
			HeaderRecallToken: "recall-secret", HeaderRecallSession: "s1"}, strings.ReplaceAll(helloBody, "%s", stream))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	reqs := up.Requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.Header.Get("X-Api-Key") != key || r.Header.Get("Authorization") != "Bearer "+key {
			t.Errorf("the key did not reach the upstream untouched: %v", r.Header)
		}
		if r.Header.Get(HeaderRecallToken) != "" || r.Header.Get(HeaderRecallSession) != "" {
			t.Errorf("Recall's headers reached the upstream: %v", r.Header)
		}
	}
	if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), "recall-secret") {
		t.Fatalf("a credential is in the log:\n%s", logs)
	}
}

func TestTenantRefusalIsInTheProvidersShapeAndNotForwarded(t *testing.T) {
	up := gatewaytest.New(gatewaytest.Script{})
	srv := httptest.NewServer(up)
	defer srv.Close()
	const spec = "acme:" + goodTokenHash
	_, gw, _ := newGateway(t, srv.URL, func(c *Config) { c.Tenants = spec })
	for _, tc := range []struct{ path, token, wantShape string }{
		{"/anthropic/v1/messages", "", `"type":"error"`},
		{"/anthropic/v1/messages", "bad-token", `"authentication_error"`},
		{"/openai/v1/chat/completions", "", `"error":{`},
		{"/anthropic/v1/models", "", `"type":"error"`},
	} {
		h := map[string]string{}
		if tc.token != "" {
			h[HeaderRecallToken] = tc.token
		}
		resp := post(t, gw+tc.path, h, strings.ReplaceAll(helloBody, "%s", "false"))
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(body), tc.wantShape) || !json.Valid(body) {
			t.Errorf("%s token %q: got %d %s, want 401 with %s", tc.path, tc.token, resp.StatusCode, body, tc.wantShape)
		}
		if got := resp.Header.Get("X-Should-Retry"); got != "false" {
			t.Errorf("%s token %q: x-should-retry %q, want false (clients resend a refusal otherwise)", tc.path, tc.token, got)
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("refused requests reached the upstream: %d", n)
	}
	resp := post(t, gw+"/anthropic/v1/messages", map[string]string{HeaderRecallToken: "good-token"}, strings.ReplaceAll(helloBody, "%s", "false"))
	resp.Body.Close()
	if resp.StatusCode != 200 || len(up.Requests()) != 1 {
		t.Fatalf("a valid token: got %d, upstream saw %d requests", resp.StatusCode, len(up.Requests()))
	}
}

// goodTokenHash is sha256("good-token").
const goodTokenHash = "461caa80a52104436e34006189430d13aba103b2c4344d446ea3d9324b0de1c0"

func TestUnreachableUpstreamAndOversizedBody(t *testing.T) {
	_, gw, _ := newGateway(t, "http://127.0.0.1:1", func(c *Config) { c.MaxBodyBytes = 1024 })
	resp := post(t, gw+"/openai/v1/chat/completions", nil, `{"model":"m","messages":[]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(body), `"error":{`) {
		t.Fatalf("unreachable upstream: got %d %s, want 502 in OpenAI's shape", resp.StatusCode, body)
	}
	resp = post(t, gw+"/anthropic/v1/messages", nil, `{"messages":"`+strings.Repeat("x", 2048)+`"}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(body), "request_too_large") {
		t.Fatalf("oversized body: got %d %s, want 413", resp.StatusCode, body)
	}
}
