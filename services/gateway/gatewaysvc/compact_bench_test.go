package gatewaysvc

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkAnthropicCompactionPath is the compaction code's cost on a
// request it does not compact (26 KB, context_management clear_thinking,
// as Claude Code sends): decoding, the block scan, the rules, the edits.
func BenchmarkAnthropicCompactionPath(b *testing.B) {
	g, _, _ := newGateway(&testing.T{}, "http://127.0.0.1:1", nil)
	msgs := ledgerHistory("bench", 2)
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 64, "messages": msgs,
		"context_management": map[string]any{"edits": []any{map[string]any{"type": "clear_thinking_20251015", "keep": "all"}}}})
	r := httptest.NewRequest("POST", "/anthropic/v1/messages", strings.NewReader(""))
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		x := &exchange{g: g, p: g.anthropic, r: r, path: "/v1/messages", tenant: ingestDefaultTenant, body: body}
		if x.compaction() {
			b.Fatal("answered")
		}
	}
}
