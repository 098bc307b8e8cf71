package gatewaysvc

import (
	"net/http"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

func TestSessionRules(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	msg := func(body string) *wire.MessagesRequest {
		r, err := wire.DecodeMessages([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	meta := `{"model":"m","metadata":{"user_id":"{\"device_id\":\"d\",\"session_id\":\"meta-1\"}"},"messages":[{"role":"user","content":"hi"}]}`
	plain := `{"model":"m","system":"sys","messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		name   string
		got    Session
		id     string
		source string
	}{
		{"header wins", AnthropicSession(h("X-Recall-Session", "mine", "X-Claude-Code-Session-Id", "cc"), msg(meta)), "mine", SourceHeader},
		{"claude code header", AnthropicSession(h("X-Claude-Code-Session-Id", "cc-1"), msg(meta)), "cc-1", SourceClaudeCode},
		{"metadata", AnthropicSession(h(), msg(meta)), "meta-1", SourceMetadata},
		{"invalid header hashed", AnthropicSession(h("X-Recall-Session", "a.b"), msg(meta)), hashID("a.b"), SourceHeader},
		{"opening", AnthropicSession(h(), msg(plain)), AnthropicSession(h(), msg(`{"model":"m","system":"sys","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`)).ID, SourceOpening},
	} {
		if c.got.ID != c.id || c.got.Source != c.source {
			t.Errorf("%s: got %+v, want %s from %s", c.name, c.got, c.id, c.source)
		}
		if err := events.ValidateID(c.got.ID); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if a, b := AnthropicSession(h(), msg(plain)).ID, AnthropicSession(h(), msg(strings.Replace(plain, "sys", "other", 1))).ID; a == b {
		t.Error("two openings share a session")
	}

	chains := &sessionChains{}
	resp := func(body string) *wire.ResponsesRequest {
		r, err := wire.DecodeResponses([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := ResponsesSession(h(), resp(`{"model":"m","prompt_cache_key":"conv-9","input":"hi"}`), chains)
	if first.ID != "conv-9" || first.Source != SourceCacheKey {
		t.Fatalf("prompt_cache_key: %+v", first)
	}
	chains.put("resp_1", "s-main")
	if s := ResponsesSession(h(), resp(`{"model":"m","previous_response_id":"resp_1","input":"more"}`), chains); s.ID != "s-main" {
		t.Fatalf("previous_response_id chain: %+v", s)
	}
	unknown := ResponsesSession(h(), resp(`{"model":"m","previous_response_id":"resp_x","input":"more"}`), chains)
	if unknown.ID != hashID("openai.previous", "resp_x") {
		t.Fatalf("unknown previous: %+v", unknown)
	}
	if s := ResponsesSession(h(), resp(`{"model":"m","conversation":{"id":"conv_abc"},"prompt_cache_key":"k","input":"x"}`), chains); s.ID != "conv_abc" {
		t.Fatalf("conversation object: %+v", s)
	}
	chat, _ := wire.DecodeChat([]byte(`{"model":"m","user":"u1","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"}]}`))
	chat2, _ := wire.DecodeChat([]byte(`{"model":"m","user":"u1","messages":[{"role":"system","content":"s"},{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`))
	if a, b := ChatSession(h(), chat), ChatSession(h(), chat2); a != b || a.Source != SourceUser {
		t.Fatalf("chat opening: %+v %+v", a, b)
	}
}
