package extractorsvc

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/envconf/envconftest"
	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/memory"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags), the defaults that are constants elsewhere agree
// with them, and what is derived is derived.
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	lit := Config{}.withDefaults()
	env.WorkerID = lit.WorkerID
	envconftest.SameDefaults(t, lit, env)
	if lit.StaleThreshold != events.DefaultStaleThreshold || lit.MaxBlockTokens != memory.DefaultMaxBlockTokens {
		t.Fatalf("stale threshold %v (constant %v), max block tokens %d (constant %d)",
			lit.StaleThreshold, events.DefaultStaleThreshold, lit.MaxBlockTokens, memory.DefaultMaxBlockTokens)
	}
	if lit.Partitions != 16 || lit.Concurrency != 8 || lit.WorkerID == "" {
		t.Fatalf("defaults: %v", lit.LogValue())
	}
	d := Config{WorkerID: "host.a b", StaleThreshold: time.Millisecond, MaxBlockTokens: -1, MaxConversationTokens: -1}.withDefaults()
	if d.WorkerID != "host_a_b" || d.StaleThreshold != time.Second || d.MaxBlockTokens != -1 || d.MaxConversationTokens != -1 {
		t.Fatalf("derived: id %q, stale threshold %v, max block tokens %d (negative: never clipped), max conversation tokens %d (negative: no cap)",
			d.WorkerID, d.StaleThreshold, d.MaxBlockTokens, d.MaxConversationTokens)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", Config{LLMConfig: LLMConfig{AnthropicAPIKey: "sk-ant-secret"}})
	if strings.Contains(buf.String(), "secret") || !strings.Contains(buf.String(), "anthropic_api_key=***") {
		t.Fatalf("the API key is not masked: %s", buf.String())
	}
}
