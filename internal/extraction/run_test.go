package extraction_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/recallhq/recall/internal/extraction"
	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/internal/telemetry/telemetrytest"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

const (
	tenant  = "acme"
	session = "sess-1"
)

var notesPath = memory.NotesPath(tenant, session)

func text(role, s string) events.Message {
	return events.Message{Role: role, Content: events.Content{{Type: events.BlockText, Text: s}}}
}

// conversation is a small coding session: a request, a failing test run, a
// fix, and a reply.
func conversation() []events.Message {
	return []events.Message{
		text(events.RoleUser, "Fix the failing test in parser.go"),
		{Role: events.RoleAssistant, Content: events.Content{
			{Type: events.BlockText, Text: "Running the tests."},
			{Type: events.BlockToolUse, ID: "toolu_a", Name: "Bash", Input: json.RawMessage(`{"command":"go test ./..."}`)},
		}},
		{Role: events.RoleUser, Content: events.Content{
			{Type: events.BlockToolResult, ToolUseID: "toolu_a", IsError: true, Content: events.Content{{Type: events.BlockText, Text: "FAIL parser_test.go:12"}}},
		}},
		text(events.RoleAssistant, "Fixed the off-by-one in parseLine; tests pass."),
	}
}

// editInput is an Edit tool input as JSON text.
func editInput(path, old, new string) string {
	b, _ := json.Marshal(memory.EditInput{FilePath: path, OldString: old, NewString: new})
	return string(b)
}

const (
	stateDesc   = "_What is actively being worked on right now? Pending tasks not yet completed. Immediate next steps._\n"
	worklogDesc = "_Step by step, what was attempted, done? Very terse summary for each step_\n"
)

// parallelEdits fills Current State and Worklog of the default template.
func parallelEdits() []llmtest.ToolCall {
	return []llmtest.ToolCall{
		{Name: "Edit", Input: editInput(notesPath, stateDesc, stateDesc+"parseLine off-by-one fixed; tests pass.\n")},
		{Name: "Edit", Input: editInput(notesPath, worklogDesc, worklogDesc+"- ran go test: FAIL parser_test.go:12\n- fixed parseLine\n")},
	}
}

func wantParallelNotes() string {
	d := strings.Replace(memory.DefaultTemplate, stateDesc, stateDesc+"parseLine off-by-one fixed; tests pass.\n", 1)
	return strings.Replace(d, worklogDesc, worklogDesc+"- ran go test: FAIL parser_test.go:12\n- fixed parseLine\n", 1)
}

// api is one of the two faked APIs with a provider pointed at it through the
// real SDK.
type api struct {
	name     string
	server   func(t testing.TB, replies ...llmtest.Reply) *llmtest.Server
	provider func(s *llmtest.Server) llm.Provider
}

var apis = []api{
	{"anthropic", llmtest.NewAnthropic, func(s *llmtest.Server) llm.Provider {
		return retrying(llm.NewAnthropic(llm.ClientOptions{APIKey: "sk-test", BaseURL: s.BaseURL(), Model: "claude-test"}))
	}},
	{"openai", llmtest.NewOpenAI, func(s *llmtest.Server) llm.Provider {
		return retrying(llm.NewOpenAI(llm.ClientOptions{APIKey: "sk-test", BaseURL: s.BaseURL(), Model: "gpt-test"}))
	}},
}

func retrying(p llm.Provider) llm.Provider {
	return llm.WithRetry(p, llm.RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond})
}

func input() extraction.Input {
	return extraction.Input{Tenant: tenant, Session: session, Notes: memory.DefaultTemplate, Template: memory.DefaultTemplate, Conversation: conversation()}
}

func run(t *testing.T, a api, in extraction.Input, replies ...llmtest.Reply) (*llmtest.Server, *extraction.Output, error) {
	t.Helper()
	s := a.server(t, replies...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := extraction.Run(ctx, a.provider(s), in)
	return s, out, err
}

func TestRunParallelEdits(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			rec := telemetrytest.NewRecorder(t)
			s, out, err := run(t, a, input(), llmtest.Reply{
				ToolCalls: parallelEdits(),
				Usage:     llmtest.Usage{Input: 100, Output: 50, CacheRead: 900, CacheCreation: 30},
			})
			if err != nil {
				t.Fatal(err)
			}
			if out.Notes != wantParallelNotes() {
				t.Errorf("notes:\n%s\nwant:\n%s", out.Notes, wantParallelNotes())
			}
			if out.EditsApplied != 2 || out.EditsRejected != 0 || out.Turns != 1 || s.Calls() != 1 {
				t.Errorf("applied %d rejected %d turns %d calls %d, want 2 0 1 1", out.EditsApplied, out.EditsRejected, out.Turns, s.Calls())
			}
			wantUsage := events.TokenUsage{InputTokens: 100, OutputTokens: 50, CacheReadTokens: 900, CacheCreationTokens: 30}
			if a.name == "openai" {
				// OpenAI reports no cache creation: the fake folds it into prompt tokens.
				wantUsage = events.TokenUsage{InputTokens: 130, OutputTokens: 50, CacheReadTokens: 900}
			}
			if out.Usage != wantUsage {
				t.Errorf("usage %+v, want %+v", out.Usage, wantUsage)
			}
			req := s.Request(t, 0)
			checkTools(t, a.name, req)
			switch a.name {
			case "anthropic":
				checkAnthropicRequest(t, req, len(conversation()))
			case "openai":
				checkOpenAIRequest(t, req)
			}
			spans := rec.Named("chat " + out.Model)
			if len(spans) != 1 {
				t.Fatalf("spans %q, want one %q", telemetrytest.Names(rec.Ended()), "chat "+out.Model)
			}
			for k, want := range map[string]any{
				"gen_ai.system": a.name, "gen_ai.usage.output_tokens": int64(50), "gen_ai.usage.cache_read.input_tokens": int64(900),
			} {
				if got, _ := telemetrytest.Attr(spans[0], attribute.Key(k)); got.AsInterface() != want {
					t.Errorf("span attribute %s = %v (%T), want %v", k, got, got, want)
				}
			}
		})
	}
}

// checkTools asserts exactly one tool, Edit, with the Edit schema.
func checkTools(t *testing.T, kind string, req map[string]any) {
	t.Helper()
	tools, _ := req["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("%d tools offered, want 1: %v", len(tools), req["tools"])
	}
	tool := tools[0].(map[string]any)
	var name string
	var schema any
	if kind == "anthropic" {
		name, schema = tool["name"].(string), tool["input_schema"]
	} else {
		fn := tool["function"].(map[string]any)
		name, schema = fn["name"].(string), fn["parameters"]
	}
	if name != "Edit" {
		t.Errorf("tool name %q, want Edit", name)
	}
	var want any
	_ = json.Unmarshal([]byte(memory.EditToolSchema), &want)
	if !jsonEqual(schema, want) {
		t.Errorf("tool schema %v, want %v", schema, want)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func checkAnthropicRequest(t *testing.T, req map[string]any, convLen int) {
	t.Helper()
	msgs := req["messages"].([]any)
	if len(msgs) != convLen+1 {
		t.Fatalf("%d messages, want %d", len(msgs), convLen+1)
	}
	prompt := lastText(msgs[len(msgs)-1])
	checkPrompt(t, prompt)
	// Exactly one cache breakpoint: the last block of the last transcript message.
	var marks []string
	for i, m := range msgs {
		for j, b := range m.(map[string]any)["content"].([]any) {
			if cc, ok := b.(map[string]any)["cache_control"]; ok {
				marks = append(marks, jsonString(cc))
				if i != convLen-1 || j != len(m.(map[string]any)["content"].([]any))-1 {
					t.Errorf("cache_control on message %d block %d, want message %d last block", i, j, convLen-1)
				}
			}
		}
	}
	if len(marks) != 1 || marks[0] != `{"type":"ephemeral"}` {
		t.Errorf("cache breakpoints %v, want one ephemeral", marks)
	}
	if sys := jsonString(req["system"]); !strings.Contains(sys, "session notes") {
		t.Errorf("system %s", sys)
	}
	// The tool pair of the transcript is sent as Anthropic blocks.
	m1 := jsonString(msgs[1])
	m2 := jsonString(msgs[2])
	if !strings.Contains(m1, `"type":"tool_use","id":"toolu_a"`) && !strings.Contains(m1, `"id":"toolu_a"`) {
		t.Errorf("assistant message lacks the tool_use: %s", m1)
	}
	if !strings.Contains(m2, `"tool_use_id":"toolu_a"`) || !strings.Contains(m2, `"is_error":true`) {
		t.Errorf("user message lacks the error tool_result: %s", m2)
	}
}

func checkOpenAIRequest(t *testing.T, req map[string]any) {
	t.Helper()
	msgs := req["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if got, want := strings.Join(roles, ","), "system,user,assistant,tool,assistant,user"; got != want {
		t.Fatalf("roles %s, want %s", got, want)
	}
	a := msgs[2].(map[string]any)
	calls := a["tool_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("assistant tool_calls %v", a["tool_calls"])
	}
	c := calls[0].(map[string]any)
	fn := c["function"].(map[string]any)
	if c["id"] != "toolu_a" || c["type"] != "function" || fn["name"] != "Bash" || fn["arguments"] != `{"command":"go test ./..."}` {
		t.Errorf("tool call %v", c)
	}
	if a["content"] != "Running the tests." {
		t.Errorf("assistant content %v", a["content"])
	}
	tm := msgs[3].(map[string]any)
	if tm["tool_call_id"] != "toolu_a" || tm["content"] != "Error: FAIL parser_test.go:12" {
		t.Errorf("tool message %v", tm)
	}
	if _, ok := req["max_tokens"]; !ok {
		t.Errorf("max_tokens not sent to a compatible server: %v", req)
	}
	checkPrompt(t, lastText(msgs[len(msgs)-1]))
}

// lastText returns the text of a message (string content or last text block).
func lastText(m any) string {
	switch c := m.(map[string]any)["content"].(type) {
	case string:
		return c
	case []any:
		for i := len(c) - 1; i >= 0; i-- {
			if s, ok := c[i].(map[string]any)["text"].(string); ok {
				return s
			}
		}
	}
	return ""
}

func checkPrompt(t *testing.T, prompt string) {
	t.Helper()
	if !strings.Contains(prompt, memory.DefaultTemplate) {
		t.Errorf("prompt does not carry the notes:\n%s", prompt)
	}
	if !strings.Contains(prompt, "Edit tool on "+notesPath) {
		t.Errorf("prompt does not name the notes path")
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// toolResults extracts (tool_use_id, text, is_error) of the tool results of
// the last tool turn of request i, in either API's shape.
type result struct {
	id, text string
	isError  bool
}

func toolResults(t *testing.T, kind string, req map[string]any) []result {
	t.Helper()
	msgs := req["messages"].([]any)
	var out []result
	if kind == "anthropic" {
		last := msgs[len(msgs)-1].(map[string]any)
		for _, b := range last["content"].([]any) {
			bm := b.(map[string]any)
			if bm["type"] != "tool_result" {
				continue
			}
			r := result{id: bm["tool_use_id"].(string), isError: bm["is_error"] == true}
			for _, c := range bm["content"].([]any) {
				r.text += c.(map[string]any)["text"].(string)
			}
			out = append(out, r)
		}
		return out
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].(map[string]any)
		if m["role"] != "tool" {
			break
		}
		txt := m["content"].(string)
		r := result{id: m["tool_call_id"].(string), text: strings.TrimPrefix(txt, "Error: "), isError: strings.HasPrefix(txt, "Error: ")}
		out = append([]result{r}, out...)
	}
	return out
}

func TestRunDeniedTool(t *testing.T) {
	deny := "only Edit on recall://acme/sess-1/memory.md is allowed"
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			s, out, err := run(t, a, input(),
				llmtest.Reply{ToolCalls: []llmtest.ToolCall{
					{ID: "t1", Name: "Bash", Input: `{"command":"cat memory.md"}`},
					{ID: "t2", Name: "Edit", Input: editInput("/home/user/notes.md", stateDesc, stateDesc+"x\n")},
					{ID: "t3", Name: "Write", Input: `{"file_path":"` + notesPath + `","content":"all new"}`},
				}},
				llmtest.Reply{ToolCalls: parallelEdits()},
			)
			if err != nil {
				t.Fatal(err)
			}
			got := toolResults(t, a.name, s.Request(t, 1))
			want := []result{{"t1", deny, true}, {"t2", deny, true}, {"t3", deny, true}}
			if len(got) != len(want) {
				t.Fatalf("tool results %+v, want %+v", got, want)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("result %d = %+v, want %+v", i, got[i], want[i])
				}
			}
			if out.Notes != wantParallelNotes() || out.EditsRejected != 3 || out.EditsApplied != 2 || out.Turns != 2 {
				t.Errorf("rejected %d applied %d turns %d; notes:\n%s", out.EditsRejected, out.EditsApplied, out.Turns, out.Notes)
			}
		})
	}
}

func TestRunHeaderEditRejectedThenFixed(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			s, out, err := run(t, a, input(),
				llmtest.Reply{Text: "Updating.", ToolCalls: []llmtest.ToolCall{
					{ID: "h1", Name: "Edit", Input: editInput(notesPath, "# Current State\n"+stateDesc, "# Current State (parser)\n"+stateDesc+"fixing\n")},
				}},
				llmtest.Reply{ToolCalls: []llmtest.ToolCall{
					{ID: "h2", Name: "Edit", Input: editInput(notesPath, stateDesc, stateDesc+"parseLine off-by-one fixed; tests pass.\n")},
				}},
			)
			if err != nil {
				t.Fatal(err)
			}
			if s.Calls() != 2 {
				t.Fatalf("%d calls, want 2", s.Calls())
			}
			got := toolResults(t, a.name, s.Request(t, 1))
			if len(got) != 1 || got[0].id != "h1" || !got[0].isError || !strings.Contains(got[0].text, "header") {
				t.Errorf("result of the header edit: %+v", got)
			}
			want := strings.Replace(memory.DefaultTemplate, stateDesc, stateDesc+"parseLine off-by-one fixed; tests pass.\n", 1)
			if out.Notes != want || out.EditsRejected != 1 || out.EditsApplied != 1 || out.Turns != 2 {
				t.Errorf("rejected %d applied %d turns %d; notes:\n%s", out.EditsRejected, out.EditsApplied, out.Turns, out.Notes)
			}
			// The second request replays the rejected call and the model's text.
			msgs := s.Request(t, 1)["messages"].([]any)
			if a.name == "anthropic" {
				// The cache breakpoint stays after the transcript.
				for i, m := range msgs {
					has := strings.Contains(jsonString(m), "cache_control")
					if has != (i == len(conversation())-1) {
						t.Errorf("turn 2: cache_control on message %d = %v", i, has)
					}
				}
			}
			if !strings.Contains(jsonString(msgs), "Updating.") {
				t.Error("the model's text of turn 1 is not in turn 2's request")
			}
		})
	}
}

func TestRunMalformedOutput(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name+"/fails", func(t *testing.T) {
			s, _, err := run(t, a, input(),
				llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "Edit", Input: `{"file_path":"` + notesPath + `"}`}}},
				llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "Edit", Input: `{"file_path": "` + notesPath + `", "old_string": `}}},
				llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "Edit", Input: `{"file_path":"` + notesPath + `","old_string":"a"}`}}},
				llmtest.Reply{ToolCalls: parallelEdits()}, // never reached
			)
			if !errors.Is(err, extraction.ErrNoValidToolCall) {
				t.Fatalf("err = %v, want ErrNoValidToolCall", err)
			}
			if s.Calls() != 3 {
				t.Errorf("%d calls, want 3 (1 + 2 retries)", s.Calls())
			}
			// Retries resend the same request.
			if string(s.Requests()[0]) != string(s.Requests()[2]) {
				t.Error("a retry sent a different request")
			}
		})
		t.Run(a.name+"/recovers", func(t *testing.T) {
			s, out, err := run(t, a, input(),
				llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "Edit", Input: `{"file_path":"` + notesPath + `"}`}}},
				llmtest.Reply{ToolCalls: parallelEdits()},
			)
			if err != nil {
				t.Fatal(err)
			}
			if s.Calls() != 2 || out.Notes != wantParallelNotes() || out.Turns != 2 {
				t.Errorf("calls %d turns %d notes:\n%s", s.Calls(), out.Turns, out.Notes)
			}
		})
	}
}

// A text answer with no tool call says the notes are current: a success
// with no edit and no retry, not a failure to park.
func TestRunNothingToChange(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			s, out, err := run(t, a, input(), llmtest.Reply{Text: "The notes are already up to date."})
			if err != nil {
				t.Fatalf("err = %v, want success", err)
			}
			if s.Calls() != 1 || !out.UpToDate || out.EditsApplied != 0 || out.Notes != input().Notes {
				t.Errorf("calls %d up_to_date %v applied %d", s.Calls(), out.UpToDate, out.EditsApplied)
			}
		})
		t.Run(a.name+"/cut off at the token limit is retried", func(t *testing.T) {
			stop := "max_tokens"
			if a.name != "anthropic" {
				stop = "length"
			}
			s, out, err := run(t, a, input(), llmtest.Reply{Text: "I will now edit", StopReason: stop}, llmtest.Reply{ToolCalls: parallelEdits()})
			if err != nil || s.Calls() != 2 || out.UpToDate || out.Notes != wantParallelNotes() {
				t.Fatalf("err %v calls %d up_to_date %v", err, s.Calls(), out != nil && out.UpToDate)
			}
		})
	}
}

func TestRunTransientErrors(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name+"/429 then success", func(t *testing.T) {
			s, out, err := run(t, a, input(), llmtest.Reply{Status: 429}, llmtest.Reply{ToolCalls: parallelEdits()})
			if err != nil {
				t.Fatal(err)
			}
			if s.Calls() != 2 || out.Notes != wantParallelNotes() {
				t.Errorf("calls %d, notes:\n%s", s.Calls(), out.Notes)
			}
		})
		t.Run(a.name+"/500s until failure", func(t *testing.T) {
			s, out, err := run(t, a, input(), llmtest.Reply{Status: 500}, llmtest.Reply{Status: 503}, llmtest.Reply{Status: 529}, llmtest.Reply{ToolCalls: parallelEdits()})
			if !errors.Is(err, llm.ErrRetryable) {
				t.Fatalf("err = %v, want ErrRetryable", err)
			}
			var ae *llm.AttemptsError
			if !errors.As(err, &ae) || ae.Attempts != 3 {
				t.Errorf("err = %v, want 3 attempts", err)
			}
			if out != nil || s.Calls() != 3 {
				t.Errorf("output %v, calls %d (want nil, 3)", out, s.Calls())
			}
		})
		t.Run(a.name+"/400 is permanent", func(t *testing.T) {
			s, _, err := run(t, a, input(), llmtest.Reply{Status: 400}, llmtest.Reply{ToolCalls: parallelEdits()})
			if err == nil || errors.Is(err, llm.ErrRetryable) {
				t.Fatalf("err = %v, want a permanent error", err)
			}
			if s.Calls() != 1 {
				t.Errorf("%d calls, want 1", s.Calls())
			}
		})
		t.Run(a.name+"/malformed body", func(t *testing.T) {
			s, out, err := run(t, a, input(), llmtest.Reply{Body: `{"id": "x", "content": [ {"type": "te`}, llmtest.Reply{ToolCalls: parallelEdits()})
			if err != nil {
				t.Fatal(err)
			}
			if s.Calls() != 2 || out.Notes != wantParallelNotes() {
				t.Errorf("calls %d, notes:\n%s", s.Calls(), out.Notes)
			}
		})
		t.Run(a.name+"/transport error", func(t *testing.T) {
			s := a.server(t)
			p := a.provider(s)
			s.Close()
			_, err := extraction.Run(context.Background(), p, input())
			if !errors.Is(err, llm.ErrRetryable) {
				t.Fatalf("err = %v, want ErrRetryable", err)
			}
		})
	}
}

func TestRunRemindersOverBudget(t *testing.T) {
	big := strings.Repeat("- a long worklog entry that keeps growing\n", 1300) // ~13650 tokens
	notes := strings.Replace(memory.DefaultTemplate, worklogDesc, worklogDesc+big, 1)
	in := input()
	in.Notes = notes
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			s, out, err := run(t, a, in, llmtest.Reply{ToolCalls: []llmtest.ToolCall{
				{Name: "Edit", Input: editInput(notesPath, big, "- condensed worklog\n")},
			}})
			if err != nil {
				t.Fatal(err)
			}
			msgs := s.Request(t, 0)["messages"].([]any)
			prompt := lastText(msgs[len(msgs)-1])
			if !strings.HasSuffix(prompt, memory.SizeReminders(notes)) || !strings.Contains(prompt, "CRITICAL") || !strings.Contains(prompt, `"Worklog": about`) {
				t.Errorf("prompt lacks the reminders; tail:\n%s", prompt[max(0, len(prompt)-600):])
			}
			want := strings.Replace(memory.DefaultTemplate, worklogDesc, worklogDesc+"- condensed worklog\n", 1)
			if out.Notes != want {
				t.Errorf("notes:\n%s", out.Notes)
			}
		})
	}
}

func TestRunCustomPrompt(t *testing.T) {
	in := input()
	in.CustomPrompt = "Path {{notesPath}}; notes:\n{{currentNotes}}\n{{keep}}"
	s, _, err := run(t, apis[0], in, llmtest.Reply{ToolCalls: parallelEdits()})
	if err != nil {
		t.Fatal(err)
	}
	msgs := s.Request(t, 0)["messages"].([]any)
	want := "Path " + notesPath + "; notes:\n" + memory.DefaultTemplate + "\n{{keep}}"
	if got := lastText(msgs[len(msgs)-1]); got != want {
		t.Errorf("prompt %q, want %q", got, want)
	}
}

func TestRunNoMessages(t *testing.T) {
	_, err := extraction.Run(context.Background(), llm.NewOffline(), extraction.Input{Tenant: tenant, Session: session})
	if !errors.Is(err, extraction.ErrNoMessages) {
		t.Fatalf("err = %v", err)
	}
}

func TestRunMaxTurns(t *testing.T) {
	bad := llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "Edit", Input: editInput(notesPath, "no such text", "x")}}}
	in := input()
	in.MaxTurns = 2
	s, out, err := run(t, apis[0], in, bad, bad, bad)
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls() != 2 || out.EditsRejected != 2 || out.EditsApplied != 0 || out.Notes != memory.DefaultTemplate {
		t.Errorf("calls %d rejected %d applied %d", s.Calls(), out.EditsRejected, out.EditsApplied)
	}
}

func TestRunAppendWorklogResponder(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			s := a.server(t)
			s.SetResponder(llmtest.AppendWorklog)
			p := a.provider(s)
			in := input()
			for i := range 2 {
				out, err := extraction.Run(context.Background(), p, in)
				if err != nil {
					t.Fatal(err)
				}
				if out.EditsApplied != 1 {
					t.Fatalf("extraction %d applied %d edits", i, out.EditsApplied)
				}
				in.Notes = out.Notes
			}
			want := strings.Replace(memory.DefaultTemplate, worklogDesc, worklogDesc+"- step 1\n- step 0\n", 1)
			if in.Notes != want {
				t.Errorf("notes:\n%s", in.Notes)
			}
		})
	}
}
