package ingestsvc

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/recallhq/recall/internal/envconf/envconftest"
)

// TestDefaultsFromTags: a Config literal gets the environment's defaults
// (one source: the tags) — but for the retention sweeper, which a literal
// runs only when it sets an interval — what is derived is derived, and the
// token hashes are logged masked.
func TestDefaultsFromTags(t *testing.T) {
	env := envconftest.FromEnvironment[Config](t)
	lit := Config{}.withDefaults()
	if env.Retention.Interval != 10*time.Minute || lit.Retention.Interval != 0 {
		t.Fatalf("retention sweep: environment every %v, literal every %v; want 10m, none", env.Retention.Interval, lit.Retention.Interval)
	}
	env.Retention = lit.Retention
	envconftest.SameDefaults(t, lit, env)
	if lit.Erase.TombstoneTTL != 24*time.Hour || lit.Erase.Drain != 500*time.Millisecond || lit.TenantInFlight != 256 || lit.ShutdownGrace != 30*time.Second {
		t.Fatalf("defaults: %v", lit.LogValue())
	}
	if c := (Config{MaxEventBytes: 32 << 20, MaxBodyBytes: 1 << 20}).withDefaults(); c.MaxBodyBytes != 32<<20+1<<10 {
		t.Fatalf("a body limit below one event of the largest size: %d", c.MaxBodyBytes)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config",
		Config{Tenants: "acme:" + HashToken("tok-a"), OperatorTokens: HashToken("tok-op")}.withDefaults())
	out := buf.String()
	if strings.Contains(out, HashToken("tok-a")) || strings.Contains(out, HashToken("tok-op")) || !strings.Contains(out, "config.tenants=***") {
		t.Fatalf("token hashes not masked: %s", out)
	}
}
