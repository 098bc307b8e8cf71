package hook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/hook"
	"github.com/recallhq/recall/internal/importer"
	"github.com/recallhq/recall/internal/natsconn"
	"github.com/recallhq/recall/internal/natstest"
	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/internal/watch"
	"github.com/recallhq/recall/pkg/client"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/ingest/ingestsvc"
)

// fakeRecall serves the two reads the hook makes, as the HTTP edge
// answers them.
func fakeRecall(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/users/ada/memory":
			json.NewEncoder(w).Encode(events.LTMReply{User: "ada", Context: `<long-term-memory user="ada">prefers tabs</long-term-memory>`})
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/users/"):
			w.WriteHeader(http.StatusNotFound)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/resolve":
			var req events.ResolveRequest
			json.NewDecoder(r.Body).Decode(&req)
			text := "<session-references>login-form: " + req.Text + "</session-references>"
			json.NewEncoder(w).Encode(events.ResolveReply{Context: &events.Message{Role: "user",
				Content: events.Content{{Type: events.BlockText, Text: text}}}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func runHook(t *testing.T, cfg hook.Config, input string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := hook.Run(context.Background(), cfg, strings.NewReader(input), &out)
	return out.String(), err
}

// TestContextHooks: SessionStart adds the user's long-term memory,
// UserPromptSubmit the context of the prompt's @@references; nothing is
// printed when there is nothing to add, or when Recall is down.
func TestContextHooks(t *testing.T) {
	srv := fakeRecall(t)
	cfg := hook.Config{Client: newHTTP(t, client.HTTPConfig{URL: srv.URL, Token: "tok"}), User: "ada", StatePath: filepath.Join(t.TempDir(), "w.json")}
	cases := []struct {
		name, user, input, want string
	}{
		{"session start", "ada", `{"session_id":"s1","hook_event_name":"SessionStart","source":"startup"}`,
			`{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"\u003clong-term-memory user=\"ada\"\u003eprefers tabs\u003c/long-term-memory\u003e"}}`},
		{"no memory yet", "bob", `{"hook_event_name":"SessionStart"}`, ""},
		{"no user", "", `{"hook_event_name":"SessionStart"}`, ""},
		{"prompt with references", "ada", `{"hook_event_name":"UserPromptSubmit","prompt":"like @@login-form did"}`,
			`{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"\u003csession-references\u003elogin-form: like @@login-form did\u003c/session-references\u003e"}}`},
		{"prompt without references", "ada", `{"hook_event_name":"UserPromptSubmit","prompt":"go on"}`, ""},
		{"other event", "ada", `{"hook_event_name":"Notification"}`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg.User = c.user
			out, err := runHook(t, cfg, c.input)
			if err != nil || strings.TrimSpace(out) != c.want {
				t.Fatalf("printed %q, %v; want %q", out, err, c.want)
			}
		})
	}

	// Recall down: an error to log, nothing printed, soon.
	cfg.Client = newHTTP(t, client.HTTPConfig{URL: "http://127.0.0.1:1", Attempts: 2})
	start := time.Now()
	for _, in := range []string{`{"hook_event_name":"SessionStart"}`, `{"hook_event_name":"UserPromptSubmit","prompt":"@@x"}`} {
		out, err := runHook(t, cfg, in)
		if err == nil || out != "" || time.Since(start) > 5*time.Second {
			t.Fatalf("%s with Recall down: printed %q, err %v after %v", in, out, err, time.Since(start))
		}
	}
}

// TestPreCompactIngestsTheTranscript: PreCompact sends everything written
// to transcript_path and returns once Recall stored it; Stop after more
// lines sends only those, from the saved offset.
func TestPreCompactIngestsTheTranscript(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pc := provision.Config{Partitions: 1, MemoryStorage: true}
	svc, err := ingestsvc.Start(ctx, ingestsvc.Config{NATS: natsconn.Config{URL: s.ClientURL()},
		Config: pc, HTTPAddr: "127.0.0.1:0"},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Shutdown(context.Background())
	_, js := s.Connect(t)

	data, err := os.ReadFile("../importer/testdata/coding-session.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	projects := t.TempDir()
	path := filepath.Join(projects, "proj", "sess-hook.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, bytes.Join(lines[:60], nil), 0o600)
	cfg := hook.Config{Client: newHTTP(t, client.HTTPConfig{URL: "http://" + svc.Addr()}), StatePath: filepath.Join(t.TempDir(), "w.json"),
		Transcripts: projects}
	input := func(event string) string {
		b, _ := json.Marshal(hook.Input{SessionID: "sess-hook", TranscriptPath: path, HookEventName: event})
		return string(b)
	}

	// The session's records, in its shard stream.
	stored := func() uint64 {
		st, err := js.Stream(ctx, pc.Layout().Stream(ingestsvc.DefaultTenant, "sess-hook"))
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	for i, step := range []struct {
		event string
		upTo  int
	}{{"PreCompact", 60}, {"Stop", len(lines)}, {"Stop", len(lines)}} {
		os.WriteFile(path, bytes.Join(lines[:step.upTo], nil), 0o600)
		if out, err := runHook(t, cfg, input(step.event)); err != nil || out != "" {
			t.Fatalf("step %d: %s printed %q, %v", i, step.event, out, err)
		}
		// The hook returned: the events are stored already.
		res, _ := importer.ClaudeCode(bytes.NewReader(bytes.Join(lines[:step.upTo], nil)), importer.Options{Session: "sess-hook"})
		if got := stored(); got != uint64(len(res.Events)) {
			t.Fatalf("step %d: after %s %d events stored, want %d", i, step.event, got, len(res.Events))
		}
	}
	st, _ := watch.LoadState(cfg.StatePath)
	if off := st.Files[path].Offset; off != int64(len(data)) {
		t.Fatalf("saved offset %d, want %d", off, len(data))
	}
}

func newHTTP(t *testing.T, cfg client.HTTPConfig) *client.HTTP {
	t.Helper()
	c, err := client.NewHTTP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFlushReadsOnlyTranscripts: a transcript_path outside the transcripts
// directory — directly, through "..", or through a symlink inside it that
// points out — is refused with ErrOutsideTranscripts before anything is
// read or sent; one inside is read (here: Recall is down, so sending fails).
func TestFlushReadsOnlyTranscripts(t *testing.T) {
	projects, elsewhere := t.TempDir(), t.TempDir()
	secret := filepath.Join(elsewhere, "secret.jsonl")
	os.WriteFile(secret, []byte(`{"type":"user"}`+"\n"), 0o600)
	os.MkdirAll(filepath.Join(projects, "p"), 0o755)
	inside := filepath.Join(projects, "p", "s.jsonl")
	os.WriteFile(inside, []byte(`{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"hi"}}`+"\n"), 0o600)
	if err := os.Symlink(secret, filepath.Join(projects, "p", "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	cfg := hook.Config{Client: newHTTP(t, client.HTTPConfig{URL: srv.URL, Attempts: 1}), Transcripts: projects,
		StatePath: filepath.Join(t.TempDir(), "w.json")}
	flush := func(path string) error {
		b, _ := json.Marshal(hook.Input{SessionID: "s", TranscriptPath: path, HookEventName: "Stop"})
		_, err := runHook(t, cfg, string(b))
		return err
	}
	for _, p := range []string{secret, filepath.Join(projects, "p", "..", "..", filepath.Base(elsewhere), "secret.jsonl"),
		filepath.Join(projects, "p", "link.jsonl"), projects} {
		if err := flush(p); !errors.Is(err, hook.ErrOutsideTranscripts) || !strings.Contains(err.Error(), "RECALL_TRANSCRIPTS") {
			t.Errorf("%s: %v, want ErrOutsideTranscripts", p, err)
		}
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("%d requests sent for refused transcripts", n)
	}
	if err := flush(inside); err == nil || errors.Is(err, hook.ErrOutsideTranscripts) || sent.Load() == 0 {
		t.Fatalf("a transcript inside: %v after %d requests, want it read and sent (and refused by the fake)", err, sent.Load())
	}
	cfg.Transcripts = ""
	if err := flush(inside); !errors.Is(err, hook.ErrOutsideTranscripts) {
		t.Fatalf("no transcripts directory: %v", err)
	}
}
