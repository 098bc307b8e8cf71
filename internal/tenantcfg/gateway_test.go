package tenantcfg

import (
	"errors"
	"reflect"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

func TestGatewaySection(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []events.ConfigFieldError
	}{
		{"valid", `{"gateway": {"compact_above_tokens": 40000, "client_compaction": {"rules": [{"name": "mine", "contains": ["summarize everything so far"], "answer": "summary_tags"}]}}}`, nil},
		{"off", `{"gateway": {"compact_above_tokens": 0, "client_compaction": {"enabled": false}}}`, nil},
		{"bad values", `{"gateway": {"compact_above_tokens": 500, "client_compaction": {"rules": [{"name": " ", "contains": ["sum"], "answer": "xml"}, {"name": "b"}]}}}`, []events.ConfigFieldError{
			{Field: "gateway.compact_above_tokens", Error: "must be 0 (off) or at least 20000 input tokens, not 500"},
			{Field: "gateway.client_compaction.rules[0].name", Error: `must name the client (e.g. "claude-code")`},
			{Field: "gateway.client_compaction.rules[0].contains[0]", Error: `a phrase of at least 8 characters, not "sum": a short one would take ordinary requests for summarization turns`},
			{Field: "gateway.client_compaction.rules[0].answer", Error: `must be "summary_tags" or "plain", not "xml"`},
			{Field: "gateway.client_compaction.rules[1].contains", Error: "must list at least one phrase of the client's summarization prompt"}}},
		{"shape", `{"gateway": {"compact_above": 1, "compact_above_tokens": "many"}}`, []events.ConfigFieldError{
			{Field: "gateway.compact_above", Error: "unknown field"},
			{Field: "gateway.compact_above_tokens", Error: "must be an integer"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			var got []events.ConfigFieldError
			var ie *InvalidError
			if errors.As(err, &ie) {
				got = ie.Errors
			} else if err != nil {
				t.Fatalf("error %v is not an *InvalidError", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("errors\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestClientCompactionRules(t *testing.T) {
	off := false
	if r := (&events.ClientCompaction{Enabled: &off}).EffectiveRules(); r != nil {
		t.Fatalf("turned off, rules %v", r)
	}
	var none *events.ClientCompaction
	rules := none.EffectiveRules()
	if len(rules) != 2 || !rules[0].Match("Your task is to create a DETAILED summary of the conversation so far … a <summary> block") ||
		rules[0].Match("create a detailed summary of the conversation") || !rules[1].Match("You are performing a CONTEXT CHECKPOINT COMPACTION.") {
		t.Fatalf("default rules %+v", rules)
	}
	if (events.ClientCompactionRule{Name: "x"}).Match("anything") {
		t.Fatal("a rule without phrases matched")
	}
}
