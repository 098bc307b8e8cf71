package wire

import (
	"errors"
	"strings"
	"testing"
)

const anthropicStream = "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":120,\"output_tokens\":1}}}\r\n\r\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: ping\ndata: {\"type\":\"ping\"}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hel\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"lo\"}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"Bash\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"ls\\\"}\"}}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":17}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestAssemblerAnthropicStream: fed in chunks of every size (events split
// anywhere, CRLF or LF), the reply is the same; cut short or carrying an
// error event, it is no reply.
func TestAssemblerAnthropicStream(t *testing.T) {
	for _, n := range []int{1, 3, 7, 64, len(anthropicStream)} {
		a := NewAssembler(ReplyAnthropic, true, 1<<20)
		for s := anthropicStream; len(s) > 0; {
			k := min(n, len(s))
			_, _ = a.Write([]byte(s[:k]))
			s = s[k:]
		}
		r, err := a.Reply()
		if err != nil {
			t.Fatalf("chunks of %d: %v", n, err)
		}
		c := r.Anthropic.Content
		if r.ID != "msg_1" || r.StopReason != "tool_use" || r.Usage.InputTokens != 120 || r.Usage.OutputTokens != 17 ||
			len(c) != 2 || c[0].Text != "hello" || c[1].ID != "toolu_1" || string(c[1].Input) != `{"command":"ls"}` {
			t.Fatalf("chunks of %d: %+v", n, r)
		}
	}
	cut := NewAssembler(ReplyAnthropic, true, 1<<20)
	_, _ = cut.Write([]byte(anthropicStream[:len(anthropicStream)-40]))
	if _, err := cut.Reply(); err == nil {
		t.Fatal("a stream cut short gave a reply")
	}
	bad := NewAssembler(ReplyAnthropic, true, 1<<20)
	_, _ = bad.Write([]byte(strings.Replace(anthropicStream, "event: message_delta", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\nevent: message_delta", 1)))
	if _, err := bad.Reply(); err == nil {
		t.Fatal("a stream with an error event gave a reply")
	}
	small := NewAssembler(ReplyAnthropic, true, 60)
	_, _ = small.Write([]byte(anthropicStream))
	if _, err := small.Reply(); !errors.Is(err, ErrReplyTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestAssemblerOpenAIBodies(t *testing.T) {
	chat := NewAssembler(ReplyChat, false, 1<<20)
	_, _ = chat.Write([]byte(`{"id":"c1","model":"m","choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":20}}}`))
	r, err := chat.Reply()
	if err != nil || r.Chat.ToolCalls[0].ID != "call_1" || r.Usage.InputTokens != 30 || r.Usage.CacheReadInputTokens != 20 || r.Usage.OutputTokens != 5 {
		t.Fatalf("chat: %+v %v", r, err)
	}
	resp := NewAssembler(ReplyResponses, false, 1<<20)
	_, _ = resp.Write([]byte(`{"id":"r1","object":"response","status":"incomplete","output":[]}`))
	if _, err := resp.Reply(); err == nil {
		t.Fatal("an incomplete response gave a reply")
	}
}
