package ingestsvc

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/events/natsce"
)

// BenchmarkBatchPath measures the CPU work of one HTTP batch of 100 events
// without NATS: decode, validate, encode to the stored message form, and
// encode the response.
func BenchmarkBatchPath(b *testing.B) {
	var batch []map[string]any
	for i := range 100 {
		ev := structured(fmt.Sprintf("evt-%d", i), "sess")
		ev["data"] = map[string]any{"uuid": fmt.Sprintf("u-%d", i), "role": "assistant", "message_id": "msg_01", "content": []any{
			map[string]any{"type": "text", "text": "Let me look at the ledger package and run the tests before changing anything."},
			map[string]any{"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": map[string]any{"command": "go test ./...", "description": "Run the tests"}},
		}, "usage": map[string]any{"input_tokens": 4, "output_tokens": 61, "cache_read_input_tokens": 14210}}
		batch = append(batch, ev)
	}
	body, _ := json.Marshal(batch)
	limits := Limits{MaxEventBytes: 512 << 10, MaxBatchEvents: 1000, MaxBodyBytes: 8 << 20}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		items, p := decodeBatch(body, limits)
		if p != nil {
			b.Fatal(p.Detail)
		}
		results := make([]EventResult, len(items))
		for i := range items {
			s, err := events.ValidateIngest(items[i].ev, "acme")
			if err != nil {
				b.Fatal(err)
			}
			m := natsce.NewMsg(testLayout.Subject("acme", s.Session), &s.Event)
			m.Header["Nats-Msg-Id"] = []string{events.DedupID("acme", s.Event.ID())}
			results[i] = EventResult{Index: i, ID: s.Event.ID(), Status: 202, Seq: uint64(i)}
		}
		_, resp := summarize(results)
		_ = mustJSON(resp)
	}
}
