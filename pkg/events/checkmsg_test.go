package events

import (
	"fmt"
	"strings"
	"testing"
)

// fullVerdict is what ValidateIngest's path says of a message's data.
func fullVerdict(data []byte) error {
	plain, err := checkData(data)
	if err != nil {
		return err
	}
	var m Message
	if err := decodeStrict(data, &m, plain); err != nil {
		return err
	}
	return m.Validate()
}

// checkMessageCases are messages the full path accepts and rejects, with
// whether checkMessage must be certain of them (the ordinary shapes).
var checkMessageCases = []struct {
	data    string
	certain bool
}{
	{`{"uuid":"u","role":"user","content":"hello"}`, true},
	{`{"uuid":"u","role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls","n":[1,-2.5e3,true,null]}}],"usage":{"input_tokens":3,"output_tokens":4},"model":"m","stop_reason":"end_turn","message_id":"x"}`, true},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"out \"q\" \u00e9"}],"is_error":true}]}`, true},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"plain"}],"query_source":"subagent","agent_id":"a","peer_id":"p","parent_uuid":"v"}`, true},
	{` {"uuid":"u","role":"user","content":[{"type":"text","text":"x","citations":[]}],"usage":{}} `, true},
	{`{"uuid":"u","role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"redacted_thinking","data":"d"},{"type":"image","source":{"type":"base64"}},{"type":"document","source":{}}]}`, true},
	{`{"UUID":"u","Role":"user","content":"case-insensitive keys"}`, false},
	{`{"uuid":"u","role":"user","content":"x","bogus":1}`, false},
	{`{"uuid":"u","role":"user","content":"x"} trailing`, false},
	{`{"uuid":"u","role":"user","content":"x"}{"again":1}`, false},
	{`{"uuid":"u","role":1,"content":"x"}`, false},
	{`{"uuid":"u","role":"admin","content":"x"}`, false},
	{`{"uuid":"","role":"user","content":"x"}`, false},
	{`{"role":"user","content":"x"}`, false},
	{`{"uuid":"u","content":"x"}`, false},
	{`{"uuid":"u","role":"user"}`, false},
	{`{"uuid":"u","role":"user","content":[]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_use","id":"t","name":"n","input":{bad}}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_use","id":"t","input":{}}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_use","name":"n"}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_result"}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"tool_result","tool_use_id":"b","content":[{"type":"tool_result","tool_use_id":"c"}]}]}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"video"}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"text":"no type"}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"text","Type":"tool_use"}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"text","type":"video"}]}`, false},
	{`{"uuid":"u","uuid":"","role":"user","content":"x"}`, false},
	{`{"uuid":"u","role":"user","content":{"type":"text"}}`, false},
	{`{"uuid":"u","role":"user","content":null}`, false},
	{`{"uuid":"u","role":"user","usage":{"input_tokens":1.5},"content":"x"}`, false},
	{`{"uuid":"u","role":"user","usage":{"input_tokens":-1},"content":"x"}`, false},
	{`{"uuid":"u","role":"user","usage":{"input_tokens":01},"content":"x"}`, false},
	{`{"uuid":"u","role":"user","query_source":"side","content":"x"}`, false},
	{`{"uuid":"u\u0001","role":"user","content":"x"}`, false},
	{"{\"uuid\":\"u\x7f\",\"role\":\"user\",\"content\":\"x\"}", false},
	{`{"uuid":"u","role":"user","content":"bad escape \x"}`, false},
	{`{"uuid":"u","role":"user","content":"cut`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"tool_use","id":"t","name":"n","input":01}]}`, false},
	{`{"uuid":"u","role":"user","content":[{"type":"text","is_error":1}]}`, false},
	{`[]`, false},
	{`null`, false},
}

// TestCheckMessageNeverAcceptsWhatValidationRejects: checkMessage is
// certain only of messages the full path accepts, and certain of the
// ordinary shapes (else it would save nothing).
func TestCheckMessageNeverAcceptsWhatValidationRejects(t *testing.T) {
	cases := checkMessageCases
	uuid := strings.Repeat("u", 257)
	many := `{"type":"tool_result","tool_use_id":"t","content":"x"}`
	for _, c := range []struct {
		data    string
		certain bool
	}{
		{fmt.Sprintf(`{"uuid":%q,"role":"user","content":"x"}`, uuid), false},
		{fmt.Sprintf(`{"uuid":%q,"role":"user","content":"x"}`, uuid[1:]), true},
		// 600 tool results of one string each: 1,200 blocks as decoded.
		{`{"uuid":"u","role":"user","content":[` + strings.TrimSuffix(strings.Repeat(many+",", 600), ",") + `]}`, false},
		{`{"uuid":"u","role":"user","content":[` + strings.TrimSuffix(strings.Repeat(many+",", 500), ",") + `]}`, true},
	} {
		cases = append(cases, c)
	}
	for _, c := range cases {
		data := []byte(c.data)
		full := fullVerdict(data)
		plain, _ := checkData(data)
		got := plain && checkMessage(data)
		if got && full != nil {
			t.Errorf("%.120s: checkMessage certain, the full path rejects: %v", c.data, full)
		}
		if c.certain && (!got || full != nil) {
			t.Errorf("%.120s: checkMessage %v, full path %v: want certain and accepted", c.data, got, full)
		}
		if !c.certain && full == nil && got {
			t.Errorf("%.120s: want checkMessage to leave it to the full path", c.data)
		}
	}
}

// FuzzCheckMessage: whatever checkMessage is certain of, the full path
// accepts.
func FuzzCheckMessage(f *testing.F) {
	for _, c := range checkMessageCases {
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, s string) {
		data := []byte(s)
		if plain, err := checkData(data); err != nil || !plain || !checkMessage(data) {
			return
		}
		if err := fullVerdict(data); err != nil {
			t.Fatalf("%q: checkMessage certain, the full path rejects: %v", s, err)
		}
	})
}
