package importer

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

// FuzzClaudeCode feeds arbitrary JSONL to the Claude Code importer. It must
// not panic or fail on bad lines (only on a missing session id); every event
// it returns must pass ingest validation for the tenant; the same input must
// give the same event ids (so a replay is deduplicated).
func FuzzClaudeCode(f *testing.F) {
	for _, name := range []string{"testdata/coding-session.jsonl", "testdata/refactor-session.jsonl"} {
		if b, err := os.ReadFile(name); err == nil {
			lines := bytes.SplitAfter(b, []byte("\n"))
			f.Add(bytes.Join(lines[:min(len(lines), 4)], nil))
		}
	}
	f.Add([]byte(`{"type":"user","sessionId":"s1","uuid":"u1","message":{"role":"user","content":"hi"}}` + "\n" + `{"type":"assistant","sessionId":"s1","uuid":"u2","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}`))
	f.Add([]byte(`{"type":"system","subtype":"compact_boundary","sessionId":"s1","uuid":"c1","compactMetadata":{"trigger":"auto","preTokens":-5}}`))
	f.Add([]byte("not json\n{\"type\":\"user\"}\n\n"))
	f.Add([]byte(`{"type":"user","sessionId":"a.b","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"","content":[{"type":"tool_result"}]}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ClaudeCode(bytes.NewReader(data), Options{Tenant: "t1"})
		if err != nil {
			if err != ErrNoSession {
				t.Fatalf("import failed on in-memory input: %v", err)
			}
			return
		}
		if events.ValidateID(res.Session) != nil {
			t.Fatalf("session %q is not a valid id", res.Session)
		}
		if len(res.Events) > res.Records+1 { // + the session.started event
			t.Fatalf("%d events from %d records", len(res.Events), res.Records)
		}
		var ids []string
		for i, e := range res.Events {
			if _, err := events.ValidateIngest(e, "t1"); err != nil {
				t.Fatalf("event %d would be rejected by ingest: %v", i, err)
			}
			if e.Subject() != res.Session {
				t.Fatalf("event %d has session %q, import says %q", i, e.Subject(), res.Session)
			}
			ids = append(ids, e.ID())
		}
		again, err := ClaudeCode(bytes.NewReader(data), Options{Tenant: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		var ids2 []string
		for _, e := range again.Events {
			ids2 = append(ids2, e.ID())
		}
		if !reflect.DeepEqual(ids, ids2) {
			t.Fatal("importing the same input twice gave different event ids")
		}
	})
}
