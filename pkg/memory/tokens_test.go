package memory

import (
	"encoding/json"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// A tool_use input counts as JSON.stringify writes it: an escape spelled in
// the stored JSON counts as the character it stands for, as JavaScript would
// write it again.
func TestToolUseInputLengthCountsCharacters(t *testing.T) {
	tests := []struct {
		raw  string
		want int // JSON.stringify(JSON.parse(raw)).length
	}{
		{`{"a":"<b>"}`, 11},
		{`{"a":"\u003cb\u003e"}`, 11}, // Go's json.Marshal spelling of "<b>"
		{`{"a": "x", "b": [1, 2]}`, 19},
		{`{"a":"\n"}`, 10},           // stays a two-character escape
		{`{"a":"\u000a"}`, 10},       // the same newline, spelled long
		{`{"a":"\""}`, 10},           // an escaped quote stays escaped
		{`{"a":"\/"}`, 9},            // "/" needs no escape
		{`{"a":"\u0001"}`, 14},       // control characters stay \u0001
		{`{"a":"\ud83d\ude00"}`, 10}, // one astral character: two UTF-16 units
		{`{"a":"😀"}`, 10},            // the same, written raw
		{`{"a":"\ud83d"}`, 14},       // a lone surrogate stays escaped
		{`{"a":"é"}`, 9},             // one unit
	}
	for _, tt := range tests {
		if got := compactJSONLen([]byte(tt.raw)); got != tt.want {
			t.Errorf("compactJSONLen(%s) = %d, want %d", tt.raw, got, tt.want)
		}
		// The trigger's one-pass decoder agrees with the message path.
		data := `{"uuid":"u","role":"assistant","content":[{"type":"tool_use","id":"t","name":"Bash","input":` + tt.raw + `}]}`
		r, err := DecodeTriggerMessage(1, 1, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		var m events.Message
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatal(err)
		}
		if want := MessageRecord(1, 1, &m).Estimate; r.Estimate != want || want != charsToTokens(4+tt.want) {
			t.Errorf("%s: decoder estimate %d, message path %d, want %d", tt.raw, r.Estimate, want, charsToTokens(4+tt.want))
		}
	}
}

// Only real usage anchors the token count: not a <synthetic> record (Claude
// Code's own notices), not a zero usage, not a user record — over ingest (the
// decoder and MessageRecord) as over the importer.
func TestUsageAnchorIsRealUsageOnly(t *testing.T) {
	usage := `"usage":{"input_tokens":90000,"output_tokens":100}`
	tests := []struct {
		name   string
		data   string
		anchor bool
	}{
		{"real usage", `{"uuid":"a","role":"assistant","model":"claude-sonnet-4-5",` + usage + `,"content":"x"}`, true},
		{"synthetic model", `{"uuid":"a","role":"assistant","model":"<synthetic>",` + usage + `,"content":"x"}`, false},
		{"zero usage", `{"uuid":"a","role":"assistant","usage":{"input_tokens":0,"output_tokens":0},"content":"x"}`, false},
		{"user record", `{"uuid":"a","role":"user",` + usage + `,"content":"x"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m events.Message
			if err := json.Unmarshal([]byte(tt.data), &m); err != nil {
				t.Fatal(err)
			}
			if got := RealUsage(&m); got != tt.anchor {
				t.Fatalf("RealUsage = %v", got)
			}
			r, err := DecodeTriggerMessage(1, 1, []byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if r.HasUsage != tt.anchor || r != MessageRecord(1, 1, &m) {
				t.Fatalf("decoder %+v, message path %+v", r, MessageRecord(1, 1, &m))
			}
			// The compaction estimate ignores it too.
			es := []WindowEntry{{Seq: 1, Message: &m}}
			if got := ContextEstimate(es, -1); (got == 90100) != tt.anchor {
				t.Fatalf("ContextEstimate = %d", got)
			}
		})
	}
}
