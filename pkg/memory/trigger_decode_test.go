package memory

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// slowDecode is the definition DecodeTriggerMessage must match.
func slowDecode(data []byte) (TriggerRecord, error) {
	var m events.Message
	if err := json.Unmarshal(data, &m); err != nil {
		return TriggerRecord{}, err
	}
	return MessageRecord(3, 4, &m), nil
}

func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	want, werr := slowDecode(data)
	got, gerr := DecodeTriggerMessage(3, 4, data)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%s: error %v, encoding/json says %v", data, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", data, got, want)
	}
}

func TestDecodeTriggerMessageCases(t *testing.T) {
	cases := []string{
		`{"uuid":"a","role":"user","content":"héllo 😀 wörld"}`,
		`{"uuid":"a","role":"assistant","content":[{"type":"text","text":"a\"b\\c\nd\u00e9\ud83d\ude00\ud83d x\udc00"}],"message_id":"m","stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":3,"cache_creation_input_tokens":2}}`,
		`{"uuid":"a","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{ "command" : "ls  -la", "n": [1, 2, {"x": null}] }}]}`,
		`{"uuid":"a","role":"assistant","content":[{"type":"tool_use","name":"X","input":null},{"type":"tool_use","name":"Y"}]}`,
		`{"uuid":"a","role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"out put"},{"type":"tool_result","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"base64","data":"AAAA"}}]}]}`,
		`{"uuid":"a","role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"zzzzzzzz"},{"type":"document","source":{}}]}`,
		`{"uuid":"a","role":"assistant","content":[{"type":"server_tool_use","name":"web","text":"abc","input":{"q":"x"}}]}`,
		`{"uuid":"a","role":"assistant","query_source":"subagent","content":null,"usage":null,"stop_reason":null}`,
		`{"uuid":"a","role":"assistant","query_source":"main","content":[],"usage":{}}`,
		`{"UUID":"a","role":"user","content":"case variant key"}`,
		`{"uuid":"a","uuid":"b","role":"user","content":"dup"}`,
		`{"uuid":"a","role":"user","content":[{"Type":"text","text":"x"}]}`,
		`{"uu\u0069d":"a","role":"user","content":"escaped key"}`,
		`{"uuid":"\u0061","role":"assist\u0061nt","content":"escaped values"}`,
		`{"uuid":"a","role":"user","content":5}`,
		`{"uuid":"a","role":"user","content":"x"} trailing`,
		`{"uuid":"a","role":"user","content":"bad \q escape"}`,
		`{"uuid":"a","usage":{"input_tokens":1.5}}`,
		`{"uuid":"a","usage":{"input_tokens":-3,"output_tokens":1e2}}`,
		`null`,
		`[]`,
		`{}`,
		`{"uuid":"a","role":"user","content":"` + "\xff\xfe invalid utf8" + `"}`,
		`  {"uuid" : "a" , "role" : "user" , "content" : [ { "type" : "text" , "text" : "spaced" } ] , "extra": {"nested": ["]", "}"]} }  `,
	}
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkDecode(t, []byte(c)) })
	}
}

func TestDecodeTriggerMessageRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"hello", "wörld", "<tag>", "a&b", "😀", "\"q\"", "back\\slash", "new\nline", "tab\t", "\u2028", "日本語"}
	str := func() string {
		var b strings.Builder
		for i := rng.IntN(12); i > 0; i-- {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	var block func(depth int) events.Block
	block = func(depth int) events.Block {
		switch rng.IntN(8) {
		case 0:
			return events.Block{Type: events.BlockText, Text: str()}
		case 1:
			return events.Block{Type: events.BlockThinking, Thinking: str(), Signature: "s"}
		case 2:
			return events.Block{Type: events.BlockRedactedThinking, Data: str()}
		case 3:
			in, _ := json.Marshal(map[string]any{"cmd": str(), "n": rng.IntN(100), "list": []string{str()}})
			return events.Block{Type: events.BlockToolUse, ID: "t", Name: str(), Input: in}
		case 4:
			b := events.Block{Type: events.BlockToolResult, ToolUseID: "t"}
			if depth < 2 {
				for i := rng.IntN(3); i > 0; i-- {
					b.Content = append(b.Content, block(depth+1))
				}
			}
			return b
		case 5:
			return events.Block{Type: events.BlockImage, Source: json.RawMessage(`{"type":"url","url":"x"}`)}
		case 6:
			return events.Block{Type: "custom_" + fmt.Sprint(rng.IntN(3)), Text: str(), Name: str()}
		default:
			return events.Block{Type: events.BlockText}
		}
	}
	for i := 0; i < 3000; i++ {
		m := events.Message{UUID: fmt.Sprint("u", i), Role: []string{"user", "assistant"}[rng.IntN(2)], MessageID: str(), StopReason: []string{"", "end_turn"}[rng.IntN(2)],
			QuerySource: []string{"", "main", "subagent"}[rng.IntN(3)], Model: "m"}
		if rng.IntN(2) == 0 {
			m.Usage = &events.Usage{InputTokens: rng.Int64N(1e6), OutputTokens: rng.Int64N(1e4), CacheReadInputTokens: rng.Int64N(1e5)}
		}
		for j := rng.IntN(5); j > 0; j-- {
			m.Content = append(m.Content, block(0))
		}
		data, _ := json.Marshal(m)
		if rng.IntN(4) == 0 { // string content
			var raw map[string]any
			_ = json.Unmarshal(data, &raw)
			raw["content"] = str()
			data, _ = json.Marshal(raw)
		}
		checkDecode(t, data)
	}
}

func BenchmarkDecodeTriggerMessage(b *testing.B) {
	m := events.Message{UUID: "0b7a4c1e-2f59-4d7e-9d1a-3c5e8f0a1b2c", Role: "assistant", MessageID: "msg_01ABCDEFGHIJ", StopReason: "tool_use",
		Usage:   &events.Usage{InputTokens: 12000, OutputTokens: 300},
		Content: events.Content{{Type: "text", Text: strings.Repeat("some text here ", 40)}, {Type: "tool_use", Name: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`)}}}
	data, _ := json.Marshal(m)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = DecodeTriggerMessage(1, 1, data)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = slowDecode(data)
		}
	})
}

func FuzzDecodeTriggerMessage(f *testing.F) {
	f.Add([]byte(`{"uuid":"a","role":"assistant","content":[{"type":"tool_use","name":"X","input":{"a":"\u00e9"}}],"usage":{"input_tokens":1}}`))
	f.Add([]byte(`{"uuid":"a","role":"user","content":"x\ud83d"}`))
	f.Add([]byte(`{"uuid":"a","content":[{"type":"tool_result","content":[{"type":"text","text":"y"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := slowDecode(data)
		got, gerr := DecodeTriggerMessage(3, 4, data)
		if werr != nil {
			return // invalid JSON: any record is acceptable, only consistency matters
		}
		if gerr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %+v (%v), want %+v", data, got, gerr, want)
		}
	})
}
