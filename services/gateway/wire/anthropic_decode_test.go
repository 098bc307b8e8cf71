package wire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The one-pass decoder must accept what encoding/json accepts with the
// same result, and leave the rest to it (DecodeMessages then answers as
// encoding/json does).
func TestDecodeMessagesFastMatchesStd(t *testing.T) {
	cases := []string{
		string(benchBody(3, 100)),
		`{"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"{\"session_id\":\"s\"}"}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a\u00e9\n\"q\"","cache_control":{"type":"ephemeral"}}]}],"system":[{"type":"text","text":"sys"}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":[{"type":"compaction","content":"S","encrypted_content":"recall.v1.x"}]},{"role":"user","content":"go"}],"context_management":{"edits":[{"type":"compact_20260112"}]},"compaction":{}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"out"}]}]}]}`,
		`{"model":"m","messages":null,"system":null,"metadata":null,"context_management":null}`,
		`{"Model":"m","messages":[]}`,
		`{"model":"m","MESSAGES":[{"role":"user","content":"x"}]}`,
		`{"model":"m","model":"n","messages":[{"role":"user","content":"x"}],"messages":[{"role":"user","content":"y"}]}`,
		`{"model":1,"messages":[]}`,
		`{"model":"m","stream":"yes","messages":[]}`,
		`{"model":"m","messages":{}}`,
		`{"model":"m","messages":[{"role":"user","content":{"type":"text"}}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}]} trailing`,
		`{"model":"m","messages":[{"role":"user","content":"x"},]}`,
		`{"model":"m","messages":[{"role":"user","content":"tab	raw"}]}`,
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff utf8\"}]}",
		`{"model":"m","messages":[{"role":"robot","content":"x"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"\ud800 lone"}]}`,
		`{"model":"m","extra":{"deep":[1,2,{"a":null}]},"messages":[{"role":"user","content":"x"}]}`,
		`{}A`,
		`{"model":"m","messages":[]}  ` + "\n",
		`{"model":"m","messages":[]}{}`,
		`[]`,
		`null`,
		``,
	}
	for _, c := range cases {
		checkDecodeMatches(t, c)
	}
}

func FuzzDecodeMessages(f *testing.F) {
	f.Add(`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"u"}}`)
	f.Add(`{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"B","input":{"c":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"o"}]}]}`)
	f.Add(`{"model":"m","messages":[{"role":"assistant","content":[{"type":"compaction","content":"S","encrypted_content":"e"}]}],"compaction":{"a":1}}`)
	f.Fuzz(func(t *testing.T, c string) { checkDecodeMatches(t, c) })
}

func checkDecodeMatches(t *testing.T, c string) {
	t.Helper()
	got, gotErr := DecodeMessages([]byte(c))
	want, wantErr := decodeMessagesStd([]byte(c))
	if wantErr == nil {
		wantErr = checkRoles(want)
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%.200s: DecodeMessages err = %v, encoding/json err = %v", c, gotErr, wantErr)
	}
	if gotErr != nil {
		if gotErr.Error() != wantErr.Error() {
			t.Fatalf("%.200s: error %q, encoding/json's %q", c, gotErr, wantErr)
		}
		return
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) || !reflect.DeepEqual(got.Raw, want.Raw) || len(got.Messages) != len(want.Messages) {
		t.Fatalf("%.200s: decoded differently:\n fast %.300s raw %v\n std  %.300s raw %v", c, g, keys(got.Raw), w, keys(want.Raw))
	}
	for i := range got.Messages {
		a, _ := json.Marshal(got.Messages[i].Message)
		b, _ := json.Marshal(want.Messages[i].Message)
		if string(a) != string(b) || string(got.Messages[i].Raw) != string(want.Messages[i].Raw) {
			t.Fatalf("%.200s: message %d differs:\n fast %s %s\n std  %s %s", c, i, a, got.Messages[i].Raw, b, want.Messages[i].Raw)
		}
	}
}

func keys(m map[string]json.RawMessage) string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return strings.Join(k, ",")
}
