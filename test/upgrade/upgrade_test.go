package upgrade

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/llm"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
	"github.com/recallhq/recall/services/stack"
)

// TestStartsOnEarlierReleasesData starts today's stack, as `recall up`
// does, on each fixture's data directory and checks that every answer the
// earlier release gave still holds — the stored records (exports), the
// session memory, the compaction it serves, the index entry, the user's
// long-term memory, the tenant configuration and its history, the erased
// session still erased — and that new writes work.
func TestStartsOnEarlierReleasesData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole pipeline")
	}
	fixtures, _ := filepath.Glob(filepath.Join("testdata", "*.tar.gz"))
	if len(fixtures) == 0 {
		t.Fatal("no fixture in testdata (go run ./test/upgrade/cmd/genfixture --commit <release>)")
	}
	for _, f := range fixtures {
		t.Run(filepath.Base(f), func(t *testing.T) { checkFixture(t, f) })
	}
}

func checkFixture(t *testing.T, archive string) {
	dir, x := unpack(t, archive)
	t.Logf("fixture of %s, written %s", x.Commit, x.Written.Format(time.RFC3339))
	for _, kv := range Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	st, err := stack.Start(ctx, stack.Options{DataDir: filepath.Join(dir, "data"), HTTPAddr: "127.0.0.1:0",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Provider: llm.NewOffline()})
	if err != nil {
		t.Fatalf("today's stack does not start on the fixture: %v", err)
	}
	a := API{Base: "http://" + st.HTTPAddr}
	t.Run("records", func(t *testing.T) { checkRecords(ctx, t, a, x) })
	t.Run("memory and index", func(t *testing.T) { checkMemory(ctx, t, a, x) })
	t.Run("compaction", func(t *testing.T) { checkCompaction(ctx, t, a, x) })
	t.Run("long-term memory", func(t *testing.T) { checkSubset(t, "user memory", x.LTM, get(ctx, t, a, "/v1/users/"+User+"/memory")) })
	t.Run("config", func(t *testing.T) {
		checkSubset(t, "config", x.Config, get(ctx, t, a, "/v1/config"))
		checkSubset(t, "config history", x.History, get(ctx, t, a, "/v1/config/history"))
	})
	t.Run("erased", func(t *testing.T) { checkErased(ctx, t, a) })
	t.Run("new writes", func(t *testing.T) { checkNewWrites(ctx, t, a, x) })
	if err := st.Close(); err != nil {
		t.Errorf("today's stack did not stop cleanly: %v", err)
	}
}

func unpack(t *testing.T, archive string) (string, *Expect) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	if err := Unpack(f, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var x Expect
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatalf("expect.json: %v", err)
	}
	return dir, &x
}

func get(ctx context.Context, t *testing.T, a API, path string) json.RawMessage {
	t.Helper()
	b, err := a.OK(ctx, http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkRecords: each session's export holds the same records, line for
// line (fields added since may be present).
func checkRecords(ctx context.Context, t *testing.T, a API, x *Expect) {
	for _, s := range Sessions {
		want := strings.Split(strings.TrimSpace(x.Exports[s]), "\n")
		got := strings.Split(strings.TrimSpace(string(get(ctx, t, a, "/v1/sessions/"+s+"/export"))), "\n")
		if len(got) != len(want) {
			t.Errorf("%s: %d records exported, the earlier release exported %d", s, len(got), len(want))
			continue
		}
		for i := range want {
			checkSubset(t, fmt.Sprintf("%s record %d", s, i+1), json.RawMessage(want[i]), json.RawMessage(got[i]))
		}
	}
}

func checkMemory(ctx context.Context, t *testing.T, a API, x *Expect) {
	for _, s := range Sessions {
		checkSubset(t, s+" memory", x.Memory[s], get(ctx, t, a, "/v1/sessions/"+s+"/memory"))
		checkSubset(t, s+" index entry", x.Index[s], get(ctx, t, a, "/v1/sessions/"+s+"/index"))
	}
}

// checkCompaction: the same request is served from the same memory with
// the same kept records (the summary's wording may have changed).
func checkCompaction(ctx context.Context, t *testing.T, a API, x *Expect) {
	for _, s := range Sessions {
		var was, now events.CompactReply
		if err := json.Unmarshal(x.Compaction[s], &was); err != nil {
			t.Fatal(err)
		}
		b, err := a.OK(ctx, http.MethodPost, "/v1/sessions/"+s+"/compact", CompactRequest)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &now); err != nil {
			t.Fatal(err)
		}
		if now.Outcome != memory.OutcomeSessionMemory || now.Outcome != was.Outcome || now.LastSummarizedID != was.LastSummarizedID ||
			now.MemoryRevision != was.MemoryRevision || !reflect.DeepEqual(keptIDs(now), keptIDs(was)) {
			t.Errorf("%s compaction: now %s (summarized to %q, memory %d, kept %v), the earlier release %s (%q, %d, %v)", s,
				now.Outcome, now.LastSummarizedID, now.MemoryRevision, keptIDs(now), was.Outcome, was.LastSummarizedID, was.MemoryRevision, keptIDs(was))
		}
	}
}

func keptIDs(r events.CompactReply) []string {
	var ids []string
	for _, e := range r.Kept {
		ids = append(ids, e.ID())
	}
	return ids
}

// checkErased: nothing of the erased session is served, and its
// tombstone still refuses its events.
func checkErased(ctx context.Context, t *testing.T, a API) {
	for _, path := range []string{"/memory", "/index", "/export"} {
		code, b, err := a.Call(ctx, http.MethodGet, "/v1/sessions/"+SessionErased+path, nil)
		if err != nil || code != http.StatusNotFound {
			t.Errorf("GET %s of the erased session: %d %s %v, want 404", path, code, b, err)
		}
	}
	list := string(get(ctx, t, a, "/v1/sessions"))
	if strings.Contains(list, SessionErased) || !strings.Contains(list, SessionOpen) {
		t.Errorf("session list: %s", list)
	}
	err := a.Publish(ctx, Conversation(SessionErased, "again", 1, false))
	if err == nil || !strings.Contains(err.Error(), "410") && !strings.Contains(err.Error(), "gone") {
		t.Errorf("an event of the erased session: %v, want 410 gone", err)
	}
}

// checkNewWrites: a new session, more turns of an old one, and a config
// change are stored and served.
func checkNewWrites(ctx context.Context, t *testing.T, a API, x *Expect) {
	if err := WriteMore(ctx, a); err != nil {
		t.Fatal(err)
	}
	for s, last := range map[string]string{SessionNew: "a11", SessionOpen: "alater3"} {
		var c events.CompactReply
		b, err := a.OK(ctx, http.MethodPost, "/v1/sessions/"+s+"/compact", CompactRequest)
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if err != nil || c.Outcome != memory.OutcomeSessionMemory || c.LastSummarizedID != last {
			t.Errorf("compacting %s: %v %s (summarized to %q, want %q)", s, err, c.Outcome, c.LastSummarizedID, last)
		}
	}
	var was events.ConfigReply
	_ = json.Unmarshal(x.Config, &was)
	b, err := a.OK(ctx, http.MethodPatch, "/v1/config", map[string]any{"tool_calls_between_updates": 4})
	var now events.ConfigReply
	if err == nil {
		err = json.Unmarshal(b, &now)
	}
	if err != nil || now.Revision != was.Revision+1 || now.Config.ToolCallsBetweenUpdates != 4 {
		t.Errorf("config patch: %v %s (revision %d, was %d)", err, b, now.Revision, was.Revision)
	}
}

// checkSubset fails unless every member of want is in got with the same
// value (objects recursively; arrays element by element, same length):
// answers may gain fields across releases, never lose or change one.
func checkSubset(t *testing.T, what string, want, got json.RawMessage) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: the fixture's answer: %v", what, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: today's answer: %v (%s)", what, err, got)
	}
	if path, ok := Subset(w, g, "$"); !ok {
		t.Errorf("%s differs at %s:\n earlier: %s\n   today: %s", what, path, want, got)
	}
}
