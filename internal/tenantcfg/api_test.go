package tenantcfg

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/store"
	"github.com/recallhq/recall/pkg/events"
)

func TestParseReportsEveryField(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []events.ConfigFieldError
	}{
		{"valid", `{"session_memory": false, "minimum_tokens_between_update": 5000, "retention": {"session_max_age": "720h"}}`, nil},
		{"thresholds", `{"minimum_message_tokens_to_init": -1, "tool_calls_between_updates": -2}`, []events.ConfigFieldError{
			{Field: "minimum_message_tokens_to_init", Error: "must be ≥ 0"},
			{Field: "tool_calls_between_updates", Error: "must be ≥ 0"}}},
		{"shape", `{"bogus": 1, "session_memory": "yes", "memory_policy": {"self": {"enabled": 1, "x": 2}}, "min_new_user_messages": 1.5}`, []events.ConfigFieldError{
			{Field: "bogus", Error: "unknown field"},
			{Field: "memory_policy.self.enabled", Error: "must be true or false"},
			{Field: "memory_policy.self.x", Error: "unknown field"},
			{Field: "min_new_user_messages", Error: "must be an integer"},
			{Field: "session_memory", Error: "must be true or false"}}},
		{"retention", `{"retention": {"session_max_age": "5s", "notifications_max_age": "soon"}}`, []events.ConfigFieldError{
			{Field: "retention.session_max_age", Error: `must be a Go duration of at least 1m (e.g. "720h"), not "5s"`},
			{Field: "retention.notifications_max_age", Error: `must be a Go duration of at least 1m (e.g. "720h"), not "soon"`}}},
		{"edits", `{"context_management": {"edits": [{"type": "nope"}, {"type": "clear_tool_uses_20250919", "keep": {"type": "input_tokens", "value": 1}}]}}`, []events.ConfigFieldError{
			{Field: "context_management.edits[0].type", Error: `"nope" is not a strategy (known: clear_tool_uses_20250919, clear_thinking_20251015)`},
			{Field: "context_management.edits[1].keep", Error: `must be {"type": "tool_uses", "value": N >= 0}`}}},
		{"edit order", `{"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}]}}`, []events.ConfigFieldError{
			{Field: "context_management.edits[1]", Error: "clear_thinking_20251015 must come before clear_tool_uses_20250919"}}},
		{"memory types", `{"custom_memory_types": [{"name": "profile", "prompt": "x"}, {"name": "a.b", "prompt": " "}]}`, []events.ConfigFieldError{
			{Field: "custom_memory_types[0].name", Error: `"profile" is taken (a built-in type or an earlier custom type)`},
			{Field: "custom_memory_types[1].name", Error: events.ValidateID("a.b").Error()},
			{Field: "custom_memory_types[1].prompt", Error: "is required"}}},
		{"policy", `{"memory_policy": {"self": {"enabled": true}, "peer": {"enabled": false}, "memory_types": ["recipes"]}}`, []events.ConfigFieldError{
			{Field: "memory_policy.memory_types[0]", Error: `unknown memory type "recipes"`}}},
		{"not an object", `[1]`, []events.ConfigFieldError{{Field: "", Error: "must be a JSON object"}}},
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

func TestDecodeOldAndNewForms(t *testing.T) {
	c, meta, err := Decode([]byte(`{"minimum_tokens_between_update": 7}`))
	if err != nil || meta != nil || c.MinimumTokensBetweenUpdate != 7 {
		t.Fatalf("bare form: %+v %v %v", c, meta, err)
	}
	b := encode(events.TenantConfig{MinimumTokensBetweenUpdate: 8}, events.ConfigMeta{Actor: events.ConfigActorTenant, Via: "http"})
	c, meta, err = Decode(b)
	if err != nil || meta == nil || meta.Actor != events.ConfigActorTenant || c.MinimumTokensBetweenUpdate != 8 {
		t.Fatalf("stored form %s: %+v %v %v", b, c, meta, err)
	}
	if _, meta, err = Decode(encode(events.TenantConfig{}, events.ConfigMeta{Actor: "operator"})); err != nil || meta == nil {
		t.Fatalf("empty config with meta: %v", err)
	}
}

func TestWritePatchHistory(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	if err := provision.Ensure(ctx, js, provision.Config{Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, events.BucketConfig)
	tenant := events.ConfigMeta{Actor: events.ConfigActorTenant, Via: "http"}
	r1, err := Write(ctx, kv, "a", events.TenantConfig{MinimumTokensBetweenUpdate: 10}, tenant, Precondition{None: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(ctx, kv, "a", events.TenantConfig{}, tenant, Precondition{None: true}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create over a stored value: %v", err)
	}
	if _, err := Write(ctx, kv, "a", events.TenantConfig{}, tenant, Precondition{Revision: r1 + 100}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale revision: %v", err)
	}
	if _, err := Write(ctx, kv, "a", events.TenantConfig{ToolCallsBetweenUpdates: -1}, tenant, Precondition{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid: %v", err)
	}
	op := events.ConfigMeta{Actor: events.ConfigActorOperator}
	pe, err := Patch(ctx, kv, "a", []byte(`{"minimum_tokens_between_update": null, "session_index": false}`), op, Precondition{Revision: r1})
	if err != nil {
		t.Fatal(err)
	}
	r2 := pe.Revision
	e, err := Read(ctx, kv, "a")
	if err != nil || e.Revision != r2 || e.Config.MinimumTokensBetweenUpdate != 0 || Bool(e.Config.SessionIndex, true) || e.Meta.Actor != "operator" {
		t.Fatalf("after patch: %+v %v", e, err)
	}
	h, _, err := History(ctx, kv, "a", Page{})
	if err != nil || len(h) != 2 {
		t.Fatalf("history %+v %v", h, err)
	}
	want := []events.ConfigChange{
		{Field: "minimum_tokens_between_update", Old: []byte("10")},
		{Field: "session_index", New: []byte("false")},
	}
	if h[1].Actor != "operator" || h[0].Actor != "tenant" || h[0].Via != "http" || !reflect.DeepEqual(h[1].Changes, want) {
		t.Fatalf("history %+v", h)
	}
	if h, _, err := History(ctx, kv, "nobody", Page{}); err != nil || len(h) != 0 {
		t.Fatalf("empty history %+v %v", h, err)
	}
}

func TestMergePatch(t *testing.T) {
	for _, tc := range [][3]string{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[1]}`, `{"a":[2]}`, `{"a":[2]}`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`{"n":12345678901234567}`, `{}`, `{"n":12345678901234567}`},
	} {
		got, err := MergePatch([]byte(tc[0]), []byte(tc[1]))
		if err != nil || string(got) != tc[2] {
			t.Errorf("MergePatch(%s, %s) = %s, %v; want %s", tc[0], tc[1], got, err, tc[2])
		}
	}
}
