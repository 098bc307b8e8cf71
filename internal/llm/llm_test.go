package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/internal/llm/llmtest"
	"github.com/recallhq/recall/pkg/events"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name   string
		cfg    llm.Config
		kind   string
		err    error
		logHas string
	}{
		{"auto without keys is offline", llm.Config{}, "offline", nil, "offline provider"},
		{"auto with anthropic key", llm.Config{AnthropicAPIKey: "k"}, "anthropic", nil, "llm provider"},
		{"auto with openai key", llm.Config{OpenAIAPIKey: "k"}, "openai", nil, ""},
		{"auto with a base url (local server)", llm.Config{BaseURL: "http://127.0.0.1:11434/v1/"}, "openai", nil, ""},
		{"explicit offline despite a key", llm.Config{Provider: "offline", AnthropicAPIKey: "k"}, "offline", nil, ""},
		{"explicit anthropic without key", llm.Config{Provider: "anthropic"}, "", llm.ErrConfig, ""},
		{"unknown", llm.Config{Provider: "gemini"}, "", llm.ErrConfig, ""},
		{"case insensitive", llm.Config{Provider: " OpenAI ", OpenAIAPIKey: "k"}, "openai", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			p, err := llm.New(tt.cfg, slog.New(slog.NewTextHandler(&buf, nil)))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if p.Name() != tt.kind {
				t.Errorf("provider %s, want %s", p.Name(), tt.kind)
			}
			if !strings.Contains(buf.String(), tt.logHas) {
				t.Errorf("log %q lacks %q", buf.String(), tt.logHas)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-fallback")
	t.Setenv("RECALL_LLM_MODEL", "claude-x")
	t.Setenv("RECALL_OPENAI_API_KEY", "sk-openai")
	var cfg struct{ llm.Config }
	if err := envconfig.Process("recall", &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.AnthropicAPIKey != "sk-fallback" || cfg.Model != "claude-x" || cfg.OpenAIAPIKey != "sk-openai" || cfg.Timeout != 120*time.Second {
		t.Errorf("config %+v", cfg.Config)
	}
	t.Setenv("RECALL_ANTHROPIC_API_KEY", "sk-recall")
	if err := envconfig.Process("recall", &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.AnthropicAPIKey != "sk-recall" {
		t.Errorf("RECALL_ANTHROPIC_API_KEY does not win over ANTHROPIC_API_KEY: %q", cfg.AnthropicAPIKey)
	}
}

func TestConfigLogValueMasksKeys(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("cfg", "llm", llm.Config{AnthropicAPIKey: "sk-ant-secret", OpenAIAPIKey: "sk-oai-secret", Model: "m"})
	if strings.Contains(buf.String(), "secret") || !strings.Contains(buf.String(), `"anthropic_api_key":"***"`) {
		t.Errorf("log %s", buf.String())
	}
}

// scripted is a provider answering with a fixed sequence of errors.
type scripted struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (s *scripted) Name() string  { return "scripted" }
func (s *scripted) Model() string { return "m" }
func (s *scripted) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		if err != nil {
			return nil, err
		}
	}
	return &llm.Response{Text: "ok"}, nil
}

func TestWithRetry(t *testing.T) {
	transient := fmt.Errorf("%w: boom", llm.ErrRetryable)
	permanent := errors.New("bad request")
	policy := llm.RetryPolicy{Attempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}
	tests := []struct {
		name  string
		errs  []error
		calls int
		err   error
	}{
		{"success", nil, 1, nil},
		{"two transient then success", []error{transient, transient}, 3, nil},
		{"transient exhausted", []error{transient, transient, transient, nil}, 3, llm.ErrRetryable},
		{"permanent not retried", []error{permanent, nil}, 1, permanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{errs: tt.errs}
			var retries []int
			pol := policy
			pol.OnRetry = func(attempt int, err error) { retries = append(retries, attempt) }
			_, err := llm.WithRetry(s, pol).Complete(context.Background(), llm.Request{})
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if s.calls != tt.calls || len(retries) != tt.calls-1 {
				t.Errorf("calls %d retries %v, want %d calls", s.calls, retries, tt.calls)
			}
		})
	}
	t.Run("gives up after its attempts", func(t *testing.T) {
		s := &scripted{errs: []error{transient, transient, transient, transient}}
		_, err := llm.WithRetry(s, policy).Complete(context.Background(), llm.Request{})
		var ae *llm.AttemptsError
		if !errors.As(err, &ae) || ae.Attempts != 3 || s.calls != 3 || !errors.Is(err, llm.ErrRetryable) ||
			!strings.HasPrefix(err.Error(), "giving up after 3 attempts: ") {
			t.Fatalf("err = %v after %d calls, want an AttemptsError after 3", err, s.calls)
		}
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		s := &scripted{errs: []error{transient, transient}}
		ctx, cancel := context.WithCancel(context.Background())
		p := llm.WithRetry(s, llm.RetryPolicy{Attempts: 5, BaseDelay: time.Hour, OnRetry: func(int, error) { cancel() }})
		_, err := p.Complete(ctx, llm.Request{})
		if !errors.Is(err, context.Canceled) || s.calls != 1 {
			t.Errorf("err = %v after %d calls", err, s.calls)
		}
	})
}

// TestRetryHonoursRetryAfter: a 429 that asks for a wait is retried after
// that wait, not the backoff (an hour here), with both APIs; a wait longer
// than MaxDelay is cut to MaxDelay.
func TestRetryHonoursRetryAfter(t *testing.T) {
	for _, kind := range []string{llmtest.Anthropic, llmtest.OpenAI} {
		t.Run(kind, func(t *testing.T) {
			s := llmtest.NewAnthropic(t)
			newProvider := func(o llm.ClientOptions) llm.Provider { return llm.NewAnthropic(o) }
			if kind == llmtest.OpenAI {
				s = llmtest.NewOpenAI(t)
				newProvider = func(o llm.ClientOptions) llm.Provider { return llm.NewOpenAI(o) }
			}
			p := newProvider(llm.ClientOptions{APIKey: "k", BaseURL: s.BaseURL(), Model: "m"})
			for _, tc := range []struct {
				name              string
				asked, max, least time.Duration
			}{
				{"asked", 200 * time.Millisecond, time.Hour, 200 * time.Millisecond},
				{"capped", time.Hour, 50 * time.Millisecond, 50 * time.Millisecond},
			} {
				s.Enqueue(llmtest.Reply{Status: http.StatusTooManyRequests, RetryAfter: tc.asked}, llmtest.Reply{Text: "ok"})
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				resp, err := llm.WithRetry(p, llm.RetryPolicy{Attempts: 2, BaseDelay: time.Hour, MaxDelay: tc.max}).Complete(ctx, llm.Request{})
				cancel()
				if d := time.Since(start); err != nil || resp.Text != "ok" || d < tc.least || d > 10*time.Second {
					t.Fatalf("%s: resp %+v err %v after %v, want ok after %v", tc.name, resp, err, d, tc.least)
				}
			}
		})
	}
}

func TestOfflineStopsAfterToolResults(t *testing.T) {
	p := llm.NewOffline()
	resp, err := p.Complete(context.Background(), llm.Request{Messages: []events.Message{
		{Role: events.RoleUser, Content: events.Content{{Type: events.BlockText, Text: "prompt"}}},
		{Role: events.RoleAssistant, Content: events.Content{{Type: events.BlockToolUse, ID: "x", Name: "Edit", Input: json.RawMessage(`{}`)}}},
		{Role: events.RoleUser, Content: events.Content{{Type: events.BlockToolResult, ToolUseID: "x"}}},
	}})
	if err != nil || len(resp.ToolCalls) != 0 || resp.Text == "" {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Complete(ctx, llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

// richConversation has thinking, an image, a document and an error result.
func richConversation() []events.Message {
	img := json.RawMessage(`{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`)
	return []events.Message{
		{Role: events.RoleUser, Content: events.Content{
			{Type: events.BlockText, Text: "what is in this screenshot?"},
			{Type: events.BlockImage, Source: img},
			{Type: events.BlockDocument, Source: json.RawMessage(`{"type":"text","media_type":"text/plain","data":"doc"}`)},
		}},
		{Role: events.RoleAssistant, Content: events.Content{
			{Type: events.BlockThinking, Thinking: "secret thoughts", Signature: "sig"},
			{Type: events.BlockText, Text: "Looking."},
			{Type: events.BlockToolUse, ID: "t1", Name: "Read", Input: json.RawMessage(`{ "file_path" : "/a.go" }`)},
		}},
		{Role: events.RoleUser, Content: events.Content{
			{Type: events.BlockToolResult, ToolUseID: "t1", IsError: true, Content: events.Content{{Type: events.BlockText, Text: "no such file"}}},
			{Type: events.BlockText, Text: "try b.go"},
		}},
	}
}

func TestAnthropicRequestShape(t *testing.T) {
	s := llmtest.NewAnthropic(t, llmtest.Reply{Text: "hi"})
	p := llm.NewAnthropic(llm.ClientOptions{APIKey: "k", BaseURL: s.BaseURL(), Model: "claude-test", MaxTokens: 77})
	resp, err := p.Complete(context.Background(), llm.Request{System: "sys", Messages: richConversation(), CacheAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "hi" || resp.StopReason != "end_turn" || resp.Model != "claude-test" {
		t.Errorf("resp %+v", resp)
	}
	body := string(s.Requests()[0])
	for _, want := range []string{
		`"max_tokens":77`, `"model":"claude-test"`,
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}`,
		`"type":"document"`, `"tool_use_id":"t1"`, `"is_error":true`, `"text":"Looking."`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("request lacks %s:\n%s", want, body)
		}
	}
	for _, bad := range []string{"secret thoughts", "cache_control", `"tools"`} {
		if strings.Contains(body, bad) {
			t.Errorf("request has %s:\n%s", bad, body)
		}
	}
}

func TestOpenAIRequestShape(t *testing.T) {
	s := llmtest.NewOpenAI(t, llmtest.Reply{Text: "hi", Usage: llmtest.Usage{Input: 10, CacheRead: 5, Output: 2}})
	p := llm.NewOpenAI(llm.ClientOptions{APIKey: "k", BaseURL: s.BaseURL(), Model: "qwen"})
	resp, err := p.Complete(context.Background(), llm.Request{System: "sys", Messages: richConversation()})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (events.TokenUsage{InputTokens: 10, CacheReadTokens: 5, OutputTokens: 2}) || resp.StopReason != "end_turn" {
		t.Errorf("resp %+v", resp)
	}
	var req struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(s.Requests()[0], &req); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(req.Messages)
	want := `[{"content":"sys","role":"system"},` +
		`{"content":[{"text":"what is in this screenshot?","type":"text"},{"image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"type":"image_url"},{"text":"[document omitted]","type":"text"}],"role":"user"},` +
		`{"content":"Looking.","role":"assistant","tool_calls":[{"function":{"arguments":"{\"file_path\":\"/a.go\"}","name":"Read"},"id":"t1","type":"function"}]},` +
		`{"content":"Error: no such file","role":"tool","tool_call_id":"t1"},` +
		`{"content":"try b.go","role":"user"}]`
	if string(got) != want {
		t.Errorf("messages\n%s\nwant\n%s", got, want)
	}
}

func TestFakeConcurrentLatency(t *testing.T) {
	s := llmtest.NewAnthropic(t)
	s.SetLatency(20 * time.Millisecond)
	s.SetResponder(func(call int, body []byte) llmtest.Reply { return llmtest.Reply{Text: fmt.Sprint(call)} })
	p := llm.NewAnthropic(llm.ClientOptions{APIKey: "k", BaseURL: s.BaseURL()})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := p.Complete(context.Background(), llm.Request{Messages: []events.Message{{Role: "user", Content: events.Content{{Type: "text", Text: "x"}}}}})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if s.Calls() != 8 || len(s.Requests()) != 8 {
		t.Errorf("calls %d", s.Calls())
	}
	// A call timing out while the fake waits is retryable.
	slow := llm.NewAnthropic(llm.ClientOptions{APIKey: "k", BaseURL: s.BaseURL(), Timeout: time.Millisecond})
	if _, err := slow.Complete(context.Background(), llm.Request{}); !errors.Is(err, llm.ErrRetryable) {
		t.Errorf("timeout: %v", err)
	}
}
