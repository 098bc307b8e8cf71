package ingestsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/recallhq/recall/internal/tenantcfg"
	"github.com/recallhq/recall/pkg/events"
)

const tokenOperator = "operator-secret-token"

func startConfigEnv(t *testing.T) *env {
	return startEnv(t, func(c *Config) { c.OperatorTokens = HashToken(tokenOperator) })
}

// do sends a request to the edge and returns the status, headers and body.
func (e *env) do(method, path, token string, hdr map[string]string, body string) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func decodeReply(t *testing.T, b []byte) events.ConfigReply {
	t.Helper()
	var r events.ConfigReply
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("reply %s: %v", b, err)
	}
	return r
}

func TestConfigAPITenantOwn(t *testing.T) {
	e := startConfigEnv(t)
	code, hdr, b := e.do("GET", "/v1/config", tokenAcme, nil, "")
	if code != 200 || hdr.Get("ETag") != `"0"` || decodeReply(t, b).Revision != 0 {
		t.Fatalf("GET before any write: %d %s %s", code, hdr.Get("ETag"), b)
	}
	code, hdr, b = e.do("PUT", "/v1/config", tokenAcme, map[string]string{"If-Match": "0"}, `{"minimum_tokens_between_update": 3000, "session_memory": false}`)
	r := decodeReply(t, b)
	if code != 200 || r.Revision == 0 || hdr.Get("ETag") != `"`+itoa(int(r.Revision))+`"` || r.Meta == nil || r.Meta.Actor != "tenant" || r.Meta.Via != "http" {
		t.Fatalf("PUT: %d %s %s", code, hdr.Get("ETag"), b)
	}
	code, hdr, b = e.do("GET", "/v1/config", tokenAcme, nil, "")
	got := decodeReply(t, b)
	if code != 200 || got.Revision != r.Revision || got.Config.MinimumTokensBetweenUpdate != 3000 || tenantcfg.Bool(got.Config.SessionMemory, true) || got.Tenant != "acme" {
		t.Fatalf("GET: %d %s", code, b)
	}
	// Compare-and-set: a stale revision is refused, the current one taken.
	code, _, b = e.do("PUT", "/v1/config", tokenAcme, map[string]string{"If-Match": `"` + itoa(int(r.Revision+50)) + `"`}, `{}`)
	if code != http.StatusPreconditionFailed || !contains(string(b), "revision-mismatch") {
		t.Fatalf("stale If-Match: %d %s", code, b)
	}
	code, _, b = e.do("PUT", "/v1/config", tokenAcme, map[string]string{"If-Match": "0"}, `{}`)
	if code != http.StatusPreconditionFailed {
		t.Fatalf("If-Match 0 over a stored value: %d %s", code, b)
	}
	code, _, b = e.do("PATCH", "/v1/config", tokenAcme, map[string]string{"If-Match": hdr.Get("ETag")}, `{"session_memory": null, "retention": {"session_max_age": "720h"}}`)
	p := decodeReply(t, b)
	if code != 200 || p.Config.SessionMemory != nil || p.Config.MinimumTokensBetweenUpdate != 3000 || p.Config.Retention.SessionMaxAge != "720h" {
		t.Fatalf("PATCH: %d %s", code, b)
	}
	code, _, b = e.do("PATCH", "/v1/config", tokenAcme, map[string]string{"If-Match": hdr.Get("ETag")}, `{"session_memory": true}`)
	if code != http.StatusPreconditionFailed {
		t.Fatalf("PATCH with a stale If-Match: %d %s", code, b)
	}
}

func TestConfigAPIValidation(t *testing.T) {
	e := startConfigEnv(t)
	code, hdr, b := e.do("PUT", "/v1/config", tokenAcme, nil,
		`{"minimum_message_tokens_to_init": -5, "bogus": true, "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "tool_uses", "value": 1}}]}}`)
	var p events.Problem
	_ = json.Unmarshal(b, &p)
	want := []events.ConfigFieldError{{Field: "bogus", Error: "unknown field"}}
	if code != http.StatusUnprocessableEntity || hdr.Get("Content-Type") != MediaProblem || !reflect.DeepEqual(p.FieldErrors, want) {
		t.Fatalf("unknown field: %d %s", code, b)
	}
	code, _, b = e.do("PUT", "/v1/config", tokenAcme, nil,
		`{"minimum_message_tokens_to_init": -5, "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "tool_uses", "value": 1}}]}}`)
	p = events.Problem{}
	_ = json.Unmarshal(b, &p)
	want = []events.ConfigFieldError{
		{Field: "minimum_message_tokens_to_init", Error: "must be ≥ 0"},
		{Field: "context_management.edits[0].keep", Error: `must be "all" or {"type": "thinking_turns", "value": N >= 0}`},
	}
	if code != http.StatusUnprocessableEntity || !reflect.DeepEqual(p.FieldErrors, want) || p.Type != ProblemTypeBase+ProblemInvalidConfig {
		t.Fatalf("invalid values: %d %s", code, b)
	}
	if code, _, b = e.do("PUT", "/v1/config", tokenAcme, nil, `{not json`); code != http.StatusBadRequest {
		t.Fatalf("not JSON: %d %s", code, b)
	}
	if code, _, b = e.do("PUT", "/v1/config", tokenAcme, map[string]string{"If-Match": "yesterday"}, `{}`); code != http.StatusBadRequest {
		t.Fatalf("bad If-Match: %d %s", code, b)
	}
	if code, _, _ = e.do("GET", "/v1/config", "", nil, ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
}

func TestConfigAPITenantsAndOperator(t *testing.T) {
	e := startConfigEnv(t)
	for _, m := range []string{"GET", "PUT", "PATCH"} {
		if code, _, b := e.do(m, "/v1/config?tenant=beta", tokenAcme, nil, `{}`); code != http.StatusForbidden {
			t.Fatalf("%s of another tenant: %d %s", m, code, b)
		}
	}
	if code, _, b := e.do("GET", "/v1/config/history?tenant=beta", tokenAcme, nil, ""); code != http.StatusForbidden {
		t.Fatalf("another tenant's history: %d %s", code, b)
	}
	if code, _, b := e.do("GET", "/v1/config", tokenOperator, nil, ""); code != http.StatusBadRequest {
		t.Fatalf("operator without ?tenant: %d %s", code, b)
	}
	code, _, b := e.do("PUT", "/v1/config?tenant=beta", tokenOperator, nil, `{"query_max_budget_tokens": 9000}`)
	if code != 200 || decodeReply(t, b).Meta.Actor != "operator" {
		t.Fatalf("operator PUT: %d %s", code, b)
	}
	code, _, b = e.do("PUT", "/v1/config", tokenAcme, nil, `{"query_max_budget_tokens": 1}`)
	if code != 200 {
		t.Fatalf("acme PUT: %d %s", code, b)
	}
	code, _, b = e.do("GET", "/v1/config", tokenBeta, nil, "")
	if r := decodeReply(t, b); code != 200 || r.Config.QueryMaxBudgetTokens != 9000 || r.Tenant != "beta" {
		t.Fatalf("beta reads the operator's write: %d %s", code, b)
	}
	code, _, b = e.do("GET", "/v1/config?tenant=acme", tokenOperator, nil, "")
	if r := decodeReply(t, b); code != 200 || r.Config.QueryMaxBudgetTokens != 1 {
		t.Fatalf("operator reads acme: %d %s", code, b)
	}
}

func TestConfigAPIHistory(t *testing.T) {
	e := startConfigEnv(t)
	e.do("PUT", "/v1/config", tokenAcme, nil, `{"minimum_tokens_between_update": 100}`)
	e.do("PATCH", "/v1/config?tenant=acme", tokenOperator, nil, `{"minimum_tokens_between_update": 200, "sm_compact": false}`)
	code, _, b := e.do("GET", "/v1/config/history", tokenAcme, nil, "")
	var h events.ConfigHistory
	if err := json.Unmarshal(b, &h); code != 200 || err != nil || len(h.Revisions) != 2 {
		t.Fatalf("history: %d %s", code, b)
	}
	first, second := h.Revisions[0], h.Revisions[1]
	if first.Actor != "tenant" || second.Actor != "operator" || second.Revision <= first.Revision || second.At.Before(first.At) {
		t.Fatalf("revisions: %s", b)
	}
	want := []events.ConfigChange{
		{Field: "minimum_tokens_between_update", Old: json.RawMessage("100"), New: json.RawMessage("200")},
		{Field: "sm_compact", New: json.RawMessage("false")},
	}
	if !reflect.DeepEqual(second.Changes, want) {
		t.Fatalf("diff: %+v", second.Changes)
	}
}

// TestConfigAPILivePickUp: a service watching RECALL_CONFIG applies a write
// made through the API.
func TestConfigAPILivePickUp(t *testing.T) {
	e := startConfigEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := tenantcfg.Watch(ctx, e.js, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, _, b := e.do("PUT", "/v1/config", tokenAcme, nil, `{"minimum_message_tokens_to_init": 4321}`)
	if code != 200 {
		t.Fatalf("PUT: %d %s", code, b)
	}
	rev := decodeReply(t, b).Revision
	deadline := time.After(5 * time.Second)
	for {
		changed := st.Changed()
		if st.Revision() >= rev {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("the write was not applied by the watcher")
		}
	}
	if got := st.Get("acme").MinimumMessageTokensToInit; got != 4321 {
		t.Fatalf("watched value = %d", got)
	}
}

func TestConfigNATSEndpoint(t *testing.T) {
	e := startConfigEnv(t)
	req := func(op string, body any) (int, []byte) {
		t.Helper()
		b, _ := json.Marshal(body)
		if body == nil {
			b = nil
		}
		m, err := e.nc.Request(events.APISubject(events.VerbConfig, "acme", op), b, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if c := m.Header.Get(micro.ErrorCodeHeader); c != "" {
			n, _ := json.Number(c).Int64()
			return int(n), m.Data
		}
		return 200, m.Data
	}
	code, b := req(events.ConfigOpPut, events.ConfigWrite{Config: json.RawMessage(`{"tool_calls_between_updates": 7}`), IfNone: true})
	r := decodeReply(t, b)
	if code != 200 || r.Meta.Actor != "tenant" || r.Meta.Via != "nats" {
		t.Fatalf("put: %d %s", code, b)
	}
	code, b = req(events.ConfigOpPatch, events.ConfigWrite{Config: json.RawMessage(`{"tool_calls_between_updates": -1}`)})
	var p events.Problem
	_ = json.Unmarshal(b, &p)
	if code != 422 || len(p.FieldErrors) != 1 || p.FieldErrors[0].Field != "tool_calls_between_updates" {
		t.Fatalf("invalid patch: %d %s", code, b)
	}
	code, b = req(events.ConfigOpPut, events.ConfigWrite{Config: json.RawMessage(`{}`), IfRevision: r.Revision + 9})
	if code != 412 {
		t.Fatalf("stale revision: %d %s", code, b)
	}
	code, b = req(events.ConfigOpGet, nil)
	if g := decodeReply(t, b); code != 200 || g.Revision != r.Revision || g.Config.ToolCallsBetweenUpdates != 7 {
		t.Fatalf("get: %d %s", code, b)
	}
	code, b = req(events.ConfigOpHistory, nil)
	if code != 200 || !contains(string(b), `"via":"nats"`) {
		t.Fatalf("history: %d %s", code, b)
	}
	if code, b = req("drop", nil); code != 400 {
		t.Fatalf("unknown op: %d %s", code, b)
	}
	// Reply-space guard: acme's inbox is not beta's reply space; the
	// request is dropped unanswered.
	if _, err := e.nc.Request(events.APISubject(events.VerbConfig, "beta", events.ConfigOpGet), nil, 300*time.Millisecond); err == nil {
		t.Fatal("a request for beta answered into acme's inbox")
	}
}
