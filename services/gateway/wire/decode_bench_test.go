package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// benchBody is a Messages request like recall bench's compaction history:
// calls tool calls with results of resultBytes each (about 200k tokens at
// 100 calls of 8 KB).
func benchBody(calls, resultBytes int) []byte {
	msgs := []map[string]any{{"role": "user", "content": "Audit the ledgers."}}
	for i := 1; i <= calls; i++ {
		id := fmt.Sprintf("toolu_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]string{"command": fmt.Sprintf("cat ledger%d.txt", i)}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id,
				"content": strings.Repeat(fmt.Sprintf("ledger %d entry balanced; ", i), resultBytes/26+1)}}})
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": "Checked."}, map[string]any{"role": "user", "content": "Go on."})
	b, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 1024, "messages": msgs,
		"context_management": map[string]any{"edits": []any{map[string]any{"type": "compact_20260112", "pause_after_compaction": true}}}})
	return b
}

func BenchmarkDecodeMessages(b *testing.B) {
	body := benchBody(100, 8000)
	b.SetBytes(int64(len(body)))
	b.Run("DecodeMessages", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeMessages(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ForRecords", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeMessagesForRecords(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			json.Valid(body)
		}
	})
	b.Run("utf8.Valid", func(b *testing.B) {
		for b.Loop() {
			utf8.Valid(body)
		}
	})
}
