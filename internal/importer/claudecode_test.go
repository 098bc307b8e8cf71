package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/recallhq/recall/pkg/events"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var fixtures = []string{"coding-session.jsonl", "refactor-session.jsonl"}

func importFile(t *testing.T, name string, opt Options) *Result {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ClaudeCode(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// rawRecords reads a fixture as generic JSON, to count independently of the
// importer.
func rawRecords(t *testing.T, name string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// expectedCounts counts the conversation in raw records the simple way.
func expectedCounts(recs []map[string]any) map[string]int {
	c := map[string]int{}
	for _, r := range recs {
		typ, _ := r["type"].(string)
		if r["subtype"] == "compact_boundary" {
			c["compaction"]++
			continue
		}
		if (typ != "user" && typ != "assistant") || r["isMeta"] == true || r["isCompactSummary"] == true {
			continue
		}
		msg := r["message"].(map[string]any)
		var blocks []any
		switch v := msg["content"].(type) {
		case string:
			blocks = []any{map[string]any{"type": "text", "text": v}}
		case []any:
			blocks = v
		}
		known := 0
		kinds := map[string]int{}
		isResult := false
		for _, b := range blocks {
			bm := b.(map[string]any)
			switch bm["type"] {
			case "text", "thinking", "tool_use":
				kinds[bm["type"].(string)]++
				known++
			case "tool_result":
				isResult = true
				known++
				if bm["is_error"] == true {
					kinds["tool_error"]++
				}
			}
		}
		if known == 0 {
			continue
		}
		for k, n := range kinds {
			c[k] += n
		}
		if r["isSidechain"] == true {
			c["subagent"]++
		}
		switch {
		case typ == "assistant":
			c["assistant"]++
		case isResult:
			c["tool_result"]++
		default:
			c["user"]++
		}
	}
	return c
}

func TestFixturesRoundTrip(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			recs := rawRecords(t, name)
			res := importFile(t, name, Options{})
			if res.Records != len(recs) {
				t.Errorf("read %d records, the file has %d", res.Records, len(recs))
			}
			want := expectedCounts(recs)
			want["started"] = 1 // the session.started event the importer adds
			if !reflect.DeepEqual(res.Counts, want) {
				t.Errorf("counts\n got %v\nwant %v", res.Counts, want)
			}
			if len(res.Warnings) > 0 {
				t.Errorf("warnings: %v", res.Warnings)
			}
			imported := res.Counts["started"] + res.Counts["user"] + res.Counts["assistant"] + res.Counts["tool_result"] + res.Counts["compaction"]
			if len(res.Events) != imported {
				t.Errorf("%d events for %d imported records", len(res.Events), imported)
			}
			skipped := 0
			for k, n := range res.Skipped {
				if !strings.HasPrefix(k, "block:") {
					skipped += n
				}
			}
			if imported-res.Counts["started"]+skipped != res.Records {
				t.Errorf("%d imported + %d skipped != %d records (skipped %v)", imported, skipped, res.Records, res.Skipped)
			}
			checkGolden(t, name, res)
		})
	}
}

func checkGolden(t *testing.T, name string, res *Result) {
	t.Helper()
	got, _ := json.MarshalIndent(map[string]any{"session": res.Session, "records": res.Records, "events": len(res.Events), "counts": res.Counts, "skipped": res.Skipped}, "", "  ")
	path := filepath.Join("testdata", strings.TrimSuffix(name, ".jsonl")+".golden.json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(want), bytes.TrimSpace(got)) {
		t.Errorf("summary differs from %s (go test -update to accept):\n%s", path, got)
	}
}

func TestEventsAreValidAndCarryUsage(t *testing.T) {
	for _, name := range fixtures {
		t.Run(name, func(t *testing.T) {
			recs := rawRecords(t, name)
			usageByUUID := map[string]map[string]any{}
			for _, r := range recs {
				if r["type"] == "assistant" {
					if u, ok := r["message"].(map[string]any)["usage"].(map[string]any); ok {
						usageByUUID[r["uuid"].(string)] = u
					}
				}
			}
			res := importFile(t, name, Options{Tenant: "acme"})
			ids := map[string]bool{}
			perMessageID := map[string]int{}
			toolUses := map[string]bool{}
			pairs, sidechain, compacted := 0, 0, 0
			for i, e := range res.Events {
				if ids[e.ID()] {
					t.Fatalf("event %d: duplicate id %s", i, e.ID())
				}
				ids[e.ID()] = true
				if e.Extensions()[events.ExtTenant] != "acme" || e.Subject() != res.Session {
					t.Fatalf("event %d: tenant %v subject %q", i, e.Extensions()[events.ExtTenant], e.Subject())
				}
				s, err := events.ValidateIngest(e, "acme")
				if err != nil {
					t.Fatalf("event %d (%s) would be rejected: %v", i, e.ID(), err)
				}
				if s.Compacted != nil {
					compacted++
					if s.Compacted.PreTokens != 155873 || s.Compacted.PostTokens <= 0 || s.Compacted.Trigger != "auto" {
						t.Errorf("compacted %+v", s.Compacted)
					}
					continue
				}
				if s.Started != nil {
					continue
				}
				m := s.Message
				if m.Role == events.RoleAssistant {
					u := usageByUUID[m.UUID]
					if m.Usage == nil || m.MessageID == "" || u == nil {
						t.Fatalf("event %d: assistant without usage or message id", i)
					}
					if m.Usage.InputTokens != int64(u["input_tokens"].(float64)) || m.Usage.OutputTokens != int64(u["output_tokens"].(float64)) ||
						m.Usage.CacheReadInputTokens != int64(u["cache_read_input_tokens"].(float64)) || m.Usage.CacheCreationInputTokens != int64(u["cache_creation_input_tokens"].(float64)) {
						t.Fatalf("event %d: usage %+v, record %v", i, m.Usage, u)
					}
					perMessageID[m.MessageID]++
				}
				if m.QuerySource == events.QuerySubagent {
					sidechain++
					if m.AgentID == "" {
						t.Errorf("event %d: subagent without agent id", i)
					}
				}
				for _, b := range m.Content {
					switch b.Type {
					case events.BlockToolUse:
						toolUses[b.ID] = true
					case events.BlockToolResult:
						if !toolUses[b.ToolUseID] {
							t.Fatalf("event %d: tool_result for %s has no earlier tool_use", i, b.ToolUseID)
						}
						pairs++
					}
				}
			}
			streamed := 0
			for _, n := range perMessageID {
				if n > 1 {
					streamed++
				}
			}
			if streamed == 0 {
				t.Error("no streamed response (several records sharing a message id)")
			}
			if pairs == 0 || pairs != res.Counts["tool_result"] {
				t.Errorf("%d tool pairs, %d tool results", pairs, res.Counts["tool_result"])
			}
			if sidechain != res.Counts["subagent"] || compacted != res.Counts["compaction"] {
				t.Errorf("sidechain %d compacted %d, counts %v", sidechain, compacted, res.Counts)
			}
			// Deterministic ids: a second import yields the same ones.
			again := importFile(t, name, Options{Tenant: "acme"})
			for i := range again.Events {
				if again.Events[i].ID() != res.Events[i].ID() {
					t.Fatalf("event %d: id %s then %s", i, res.Events[i].ID(), again.Events[i].ID())
				}
			}
		})
	}
}

func TestDemoFixtureShape(t *testing.T) {
	res := importFile(t, "coding-session.jsonl", Options{})
	if res.Records < 150 {
		t.Errorf("%d records, the demo wants at least 150", res.Records)
	}
	if res.Counts["tool_error"] < 3 || res.Counts["tool_use"] < 40 || res.Counts["user"] < 4 {
		t.Errorf("counts %v: want many tool calls, errors and several prompts", res.Counts)
	}
	if res.Counts["subagent"] != 0 || res.Counts["compaction"] != 0 {
		t.Errorf("the demo session is main-thread only without compaction: %v", res.Counts)
	}
}

func TestOptionsAndBadLines(t *testing.T) {
	in := strings.Join([]string{
		`{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"file-session","timestamp":"2025-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}`,
		`not json`,
		``,
		`{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"file-session","message":{"id":"msg_1","role":"assistant","model":"<synthetic>","content":[{"type":"text","text":"API Error"}]},"isApiErrorMessage":true}`,
		`{"type":"assistant","uuid":"a2","parentUuid":"u1","sessionId":"file-session","message":{"id":"msg_2","role":"assistant","content":[{"type":"tool_use","name":"Read","input":{}}]}}`,
		`{"type":"progress","uuid":"p1"}`,
	}, "\n")
	res, err := ClaudeCode(strings.NewReader(in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Session != "file-session" || len(res.Events) != 2 || res.Events[1].ID() != "file-session-u1" {
		t.Fatalf("session %q, %d events", res.Session, len(res.Events))
	}
	want := map[string]int{"malformed": 1, "synthetic": 1, "invalid": 1, "progress": 1}
	if !reflect.DeepEqual(res.Skipped, want) {
		t.Errorf("skipped %v, want %v", res.Skipped, want)
	}
	if len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0], "line 2") || !strings.Contains(res.Warnings[1], "line 5: record would be rejected: data.content[0].id: required for tool_use") {
		t.Errorf("warnings %q", res.Warnings)
	}
	res, err = ClaudeCode(strings.NewReader(in), Options{Session: "mine", Source: "test"})
	if err != nil || res.Events[1].Subject() != "mine" || res.Events[1].ID() != "mine-u1" || res.Events[1].Source() != "test" {
		t.Fatalf("override: %v %+v", err, res)
	}
	if _, err := ClaudeCode(strings.NewReader(`{"type":"summary","summary":"x"}`), Options{}); err != ErrNoSession {
		t.Fatalf("no session: %v", err)
	}
	if _, err := ClaudeCode(strings.NewReader(in), Options{Session: "bad.session"}); err == nil {
		t.Fatal("a bad session id was accepted")
	}
}

// The importer describes the session first: working directory, model, and
// the parent whose history a resumed session copied.
func TestClaudeCodeSessionStarted(t *testing.T) {
	jsonl := `{"type":"user","uuid":"p1","sessionId":"parent-1","cwd":"/repo","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"Start the refactor."}}
{"type":"user","uuid":"c1","sessionId":"child-1","cwd":"/repo","timestamp":"2026-01-01T01:00:00Z","message":{"role":"user","content":"Go on."}}
{"type":"assistant","uuid":"c2","sessionId":"child-1","cwd":"/repo","timestamp":"2026-01-01T01:00:01Z","message":{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn"}}
`
	res, err := ClaudeCode(strings.NewReader(jsonl), Options{Session: "child-1"})
	if err != nil {
		t.Fatal(err)
	}
	first := res.Events[0]
	if first.Type() != events.TypeSessionStarted || first.ID() != "child-1-started" || res.Counts["started"] != 1 {
		t.Fatalf("first event: %s %s", first.Type(), first.ID())
	}
	var st events.SessionStarted
	if err := first.DataAs(&st); err != nil {
		t.Fatal(err)
	}
	if st.CWD != "/repo" || st.Model != "claude-sonnet-4-5" || st.ParentSession != "parent-1" {
		t.Fatalf("started: %+v", st)
	}
	// A file of one session has no parent.
	res, err = ClaudeCode(strings.NewReader(jsonl[strings.IndexByte(jsonl, '\n')+1:]), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var single events.SessionStarted
	if err := res.Events[0].DataAs(&single); err != nil || single.ParentSession != "" {
		t.Fatalf("single session: %+v %v", single, err)
	}
}
