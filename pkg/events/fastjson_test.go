package events

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// The fast decoder must accept exactly what encoding/json accepts, with the
// same result, for the shapes ingest sees.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	cases := []string{
		`{"uuid":"u","role":"user","content":"hello"}`,
		`{"uuid":"u","role":"assistant","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}],"usage":{"input_tokens":3,"output_tokens":4}}`,
		`{"uuid":"u","role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"out"}],"is_error":true}]}`,
		`{"uuid":"u","role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"plain"}]}`,
		`{"UUID":"u","Role":"user","content":"case-insensitive keys"}`,
		`{"uuid":"u","role":"user","content":"x","bogus":1}`,
		`{"uuid":"u","role":"user","content":[{"type":"text","text":"x","citations":[]}]}`,
		`{"uuid":"u","role":"user","content":"x"} trailing`,
		`{"uuid":"u","role":"user","content":"x"}{"again":1}`,
		`{"uuid":"u","role":1,"content":"x"}`,
		`{"uuid":"u","role":"user","content":[{"type":"tool_use","id":"t","name":"n","input":{bad}}]}`,
		`{"uuid":"u","role":"user","content":{"type":"text"}}`,
		`{"uuid":"u","role":"user","content":null}`,
		`{"uuid":"u","role":"user","usage":{"input_tokens":1.5},"content":"x"}`,
		`{"uuid":"u","role":"user","content":"\ud83d\ude00 emoji"}`,
		`{"uuid":"a","role":"assistant","content":[{"type":"tool_use","name":"X","input":null},{"type":"image","source":null}]}`,
		`[]`,
		`null`,
	}
	for _, c := range cases {
		var fast, std Message
		fastErr := decodeStrict([]byte(c), &fast, fastSafe([]byte(c)))
		dec := json.NewDecoder(stringsReader(c))
		dec.DisallowUnknownFields()
		stdErr := dec.Decode(&std)
		if stdErr == nil && dec.More() {
			stdErr = errTrailing
		}
		if (fastErr == nil) != (stdErr == nil) {
			t.Errorf("%s: decodeStrict err = %v, encoding/json err = %v", c, fastErr, stdErr)
			continue
		}
		if fastErr != nil {
			continue
		}
		a, _ := json.Marshal(fast)
		b, _ := json.Marshal(std)
		if string(a) != string(b) {
			t.Errorf("%s: decoded differently:\n fast %s\n std  %s", c, a, b)
		}
		m, err := DecodeMessage([]byte(c))
		if err != nil {
			t.Errorf("%s: DecodeMessage: %v", c, err)
		} else if d, _ := json.Marshal(m); string(d) != string(b) {
			t.Errorf("%s: DecodeMessage decoded differently: %s", c, d)
		}
	}
}

var errTrailing = &FieldError{Field: "data", Reason: "trailing"}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// FuzzFastDecode checks that the fast decoder and encoding/json agree on
// every input: both accept with the same result, or both reject.
func FuzzFastDecode(f *testing.F) {
	f.Add(`{"uuid":"u","role":"user","content":"hello"}`)
	f.Add(`{"uuid":"a","role":"assistant","content":[{"type":"tool_use","name":"X","input":null}]}`)
	f.Add(`{"uuid":"u","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}]}`)
	f.Add(`{"uuid":"u","role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"o"}]}]}`)
	f.Fuzz(func(t *testing.T, c string) {
		var fast, std Message
		fastErr := decodeStrict([]byte(c), &fast, fastSafe([]byte(c)))
		dec := json.NewDecoder(strings.NewReader(c))
		dec.DisallowUnknownFields()
		stdErr := dec.Decode(&std)
		if stdErr == nil && dec.More() {
			stdErr = errTrailing
		}
		if (fastErr == nil) != (stdErr == nil) {
			t.Fatalf("decodeStrict err = %v, encoding/json err = %v", fastErr, stdErr)
		}
		if fastErr == nil {
			a, _ := json.Marshal(fast)
			b, _ := json.Marshal(std)
			if string(a) != string(b) {
				t.Fatalf("decoded differently:\n fast %s\n std  %s", a, b)
			}
		}
	})
}
