package gatewaysvc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/transcript"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/services/gateway/wire"
)

// fixture is one recorded request of Claude Code (testdata/claudecode).
type fixture struct {
	Path     string            `json:"path"`
	Headers  map[string]string `json:"headers"`
	Body     json.RawMessage   `json:"body"`
	Kind     string            `json:"kind"`
	Response struct {
		Content    events.Content  `json:"content"`
		StopReason string          `json:"stop_reason"`
		Usage      events.Usage    `json:"usage"`
		JSON       json.RawMessage `json:"json"`
	} `json:"response"`
}

// loadFixtures reads the recorded run in order, tools put back in place.
func loadFixtures(t *testing.T, dir string) []fixture {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "[0-9][0-9][0-9]-*.json"))
	sort.Strings(files)
	var out []fixture
	for _, f := range files {
		var fx fixture
		b, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(b, &fx)
		}
		if err != nil {
			t.Fatal(f, err)
		}
		var body map[string]json.RawMessage
		_ = json.Unmarshal(fx.Body, &body)
		var ref struct {
			Ref string `json:"$ref"`
		}
		if json.Unmarshal(body["tools"], &ref) == nil && ref.Ref != "" {
			tools, err := os.ReadFile(filepath.Join(dir, ref.Ref))
			if err != nil {
				t.Fatal(err)
			}
			body["tools"] = tools
			fx.Body, _ = json.Marshal(body)
		}
		out = append(out, fx)
	}
	return out
}

// replayer is an upstream answering each request with the recorded answer
// of the fixture being replayed.
type replayer struct {
	mu  sync.Mutex
	cur *fixture
	n   int
}

func (rp *replayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rp.mu.Lock()
	fx := rp.cur
	rp.n++
	n := rp.n
	rp.mu.Unlock()
	if len(fx.Response.JSON) > 0 {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(fx.Response.JSON)
		return
	}
	writeSSE(w, wire.Response{ID: fmt.Sprintf("msg_replayed_%d", n),
		Model: "claude-opus-5-5", Content: fx.Response.Content, StopReason: fx.Response.StopReason, Usage: fx.Response.Usage})
}

const secretKey = "sk-ant-secret-never-stored-0123456789"

// replay sends the fixtures through the gateway at url, one at a time,
// each answered as recorded.
func replay(t *testing.T, url string, rp *replayer, fxs []fixture) {
	t.Helper()
	for i := range fxs {
		fx := &fxs[i]
		rp.mu.Lock()
		rp.cur = fx
		rp.mu.Unlock()
		h := map[string]string{"x-api-key": secretKey, "anthropic-version": "2023-06-01"}
		for _, k := range []string{"x-claude-code-session-id", "x-claude-code-agent-id", "anthropic-beta"} {
			if v := fx.Headers[k]; v != "" {
				h[k] = v
			}
		}
		path, _, _ := strings.Cut(fx.Path, "?")
		resp := post(t, url+"/anthropic"+path, h, string(fx.Body))
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("fixture %d: status %d: %s", i, resp.StatusCode, buf.String())
		}
	}
}

// TestCaptureClaudeCodeRun replays Claude Code's recorded run (45 calls,
// parallel calls, a 40 KB output as a preview, a subagent, four
// compactions): every tool call and result of the main thread is stored
// once, the subagent's apart, neither a summarization turn nor a restated
// history as user input, the prompt once, the usage with every answer;
// replayed again through a new gateway (a restart), nothing more is stored;
// the provider key is in no record.
func TestCaptureClaudeCodeRun(t *testing.T) {
	env := startRecall(t)
	rp := &replayer{}
	up := upstreamFunc(t, rp.ServeHTTP)
	g, url, logs := env.attached(t, up)
	fxs := loadFixtures(t, "testdata/claudecode")
	session := fxs[0].Headers["x-claude-code-session-id"]
	replay(t, url, rp, fxs)
	settled(t, g)
	recs := env.records(t, session)
	checkClaudeCodeRecords(t, recs)
	n := len(recs)

	g2, url2, _ := env.attached(t, up) // a restarted gateway: nothing in memory
	replay(t, url2, rp, fxs)
	settled(t, g2)
	again := env.records(t, session)
	if len(again) != n {
		t.Fatalf("after a restart the replay stored %d more records", len(again)-n)
	}
	if g.stats.CaptureFailed.Load()+g2.stats.CaptureFailed.Load() != 0 {
		t.Fatalf("captures failed: %d, %d", g.stats.CaptureFailed.Load(), g2.stats.CaptureFailed.Load())
	}
	assertNoSecret(t, env, logs.String())
}

func checkClaudeCodeRecords(t *testing.T, recs []events.Message) {
	t.Helper()
	uses, results := countTools(recs, true)
	for id, n := range uses {
		if n != 1 || results[id] != 1 {
			t.Errorf("tool call %s stored %d times, its result %d times", id, n, results[id])
		}
	}
	subUses, subResults := countTools(recs, false)
	if len(subUses) != 1 || len(subResults) != 1 {
		t.Errorf("the subagent's sidechain holds %d calls and %d results, want 1 and 1", len(subUses), len(subResults))
	}
	prompts, usage := 0, 0
	for _, m := range recs {
		text := wire.Text(m.Content)
		if m.Role == events.RoleUser && m.IsMain() && strings.Contains(text, "Read the files") {
			prompts++
		}
		if strings.Contains(text, claudeCodeSummaryRequest) || strings.HasPrefix(text, claudeCodeContinued) || strings.Contains(text, "<summary>") {
			t.Errorf("record %s stores a compaction: %.120q", m.UUID, text)
		}
		if m.Role == events.RoleAssistant && m.Usage != nil && m.Usage.InputTokens > 0 {
			usage++
		}
		if !m.IsMain() && m.AgentID == "" {
			t.Errorf("sidechain record %s has no agent id", m.UUID)
		}
	}
	t.Logf("%d records: main %d calls / %d results, sidechain %d / %d, %d answers with usage", len(recs), len(uses), len(results), len(subUses), len(subResults), usage)
	if prompts != 1 {
		t.Errorf("the prompt is stored %d times", prompts)
	}
	if usage < 45 {
		t.Errorf("%d assistant records carry usage, want one per answer", usage)
	}
}

// assertNoSecret greps every stored message (headers and data) of every
// stream, and the logs, for the provider key.
func assertNoSecret(t *testing.T, env *recallEnv, logs string) {
	t.Helper()
	if strings.Contains(logs, secretKey) {
		t.Fatal("the provider key is in the gateway's log")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	scanned := 0
	for name := range env.js.StreamNames(ctx).Name() {
		err := transcript.ScanRaw(ctx, env.nc, name, "", 0, 0, 0, func(m transcript.Raw) bool {
			scanned++
			for k, v := range m.Header {
				if strings.Contains(k+strings.Join(v, ","), secretKey) {
					t.Fatalf("stream %s seq %d: the provider key is in header %s", name, m.Seq, k)
				}
			}
			if bytes.Contains(m.Data, []byte(secretKey)) {
				t.Fatalf("stream %s seq %d: the provider key is in the data", name, m.Seq)
			}
			return true
		})
		if err != nil && !strings.Contains(err.Error(), "no responders") {
			t.Logf("stream %s: %v", name, err)
		}
	}
	if scanned == 0 {
		t.Fatal("no stored message scanned: the check proves nothing")
	}
}
